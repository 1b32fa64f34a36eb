package protocol

import (
	"fmt"
	"slices"
	"sort"
	"sync"
)

// Info describes one protocol as the negotiation sees it.
type Info struct {
	// Name identifies the protocol, for example "/chat". See ValidName.
	Name string
	// Versions lists the supported versions (see ValidVersion), at least one
	// and at most MaxVersions, no two equal under CompareVersions. The order
	// does not matter to SelectHighest.
	Versions []string
	// Select chooses the version on the acceptor side. Nil means SelectHighest.
	Select SelectFunc
}

// ValidName reports whether name is a well-formed protocol name: it starts
// with "/", is 2 to MaxNameLen bytes long and contains only printable ASCII
// other than space (0x21 to 0x7e).
func ValidName(name string) bool {
	if len(name) < 2 || len(name) > MaxNameLen || name[0] != '/' {
		return false
	}
	for i := 0; i < len(name); i++ {
		if name[i] < 0x21 || name[i] > 0x7e {
			return false
		}
	}
	return true
}

// Validate checks the name and the versions of i.
func (i Info) Validate() error {
	if !ValidName(i.Name) {
		return fmt.Errorf("%w: %q", ErrInvalidName, truncate(i.Name))
	}
	return validateVersions(i.Versions)
}

func validateVersions(vs []string) error {
	if len(vs) == 0 {
		return fmt.Errorf("%w: no versions", ErrInvalidInfo)
	}
	if len(vs) > MaxVersions {
		return fmt.Errorf("%w: %d versions, at most %d", ErrInvalidInfo, len(vs), MaxVersions)
	}
	for k, v := range vs {
		if !ValidVersion(v) {
			return fmt.Errorf("%w: %q", ErrInvalidVersion, truncate(v))
		}
		for _, w := range vs[:k] {
			if CompareVersions(v, w) == 0 {
				return fmt.Errorf("%w: versions %q and %q are equal", ErrInvalidInfo, w, v)
			}
		}
	}
	return nil
}

func (i Info) clone() Info {
	i.Versions = slices.Clone(i.Versions)
	return i
}

// Registry holds the protocols a node accepts, by name. It is safe for
// concurrent use. The zero value is an empty registry ready to use.
type Registry struct {
	mu     sync.RWMutex
	protos map[string]Info
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{}
}

// Register validates info and adds it. Registering a name twice returns
// ErrDuplicateProtocol. The registry keeps its own copy of the versions.
func (r *Registry) Register(info Info) error {
	if err := info.Validate(); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.protos[info.Name]; ok {
		return fmt.Errorf("%w: %s", ErrDuplicateProtocol, info.Name)
	}
	if r.protos == nil {
		r.protos = make(map[string]Info)
	}
	r.protos[info.Name] = info.clone()
	return nil
}

// Unregister removes the protocol of the given name and reports whether it was
// registered. Streams already negotiated are not affected.
func (r *Registry) Unregister(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.protos[name]
	delete(r.protos, name)
	return ok
}

// Lookup returns the protocol registered under name. The returned Info has its
// own copy of the versions.
func (r *Registry) Lookup(name string) (Info, bool) {
	info, ok := r.lookup(name)
	if !ok {
		return Info{}, false
	}
	return info.clone(), true
}

// lookup returns the stored Info without copying; callers must not modify it.
func (r *Registry) lookup(name string) (Info, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	info, ok := r.protos[name]
	return info, ok
}

// Names returns the registered names in sorted order.
func (r *Registry) Names() []string {
	r.mu.RLock()
	names := make([]string, 0, len(r.protos))
	for n := range r.protos {
		names = append(names, n)
	}
	r.mu.RUnlock()
	sort.Strings(names)
	return names
}
