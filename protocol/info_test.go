package protocol

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
)

func TestInfoValidate(t *testing.T) {
	many := make([]string, MaxVersions+1)
	for i := range many {
		many[i] = fmt.Sprint(i)
	}
	tests := []struct {
		info Info
		want error
	}{
		{Info{Name: "/chat", Versions: []string{"1.0"}}, nil},
		{Info{Name: "/a/b-c_d.e", Versions: []string{"1", "2", "10"}}, nil},
		{Info{Name: "/" + strings.Repeat("x", MaxNameLen-1), Versions: []string{"1"}}, nil},
		{Info{Name: "/x", Versions: many[:MaxVersions]}, nil},
		{Info{Name: "", Versions: []string{"1"}}, ErrInvalidName},
		{Info{Name: "/", Versions: []string{"1"}}, ErrInvalidName},
		{Info{Name: "chat", Versions: []string{"1"}}, ErrInvalidName},
		{Info{Name: "/ch at", Versions: []string{"1"}}, ErrInvalidName},
		{Info{Name: "/chat\n", Versions: []string{"1"}}, ErrInvalidName},
		{Info{Name: "/" + strings.Repeat("x", MaxNameLen), Versions: []string{"1"}}, ErrInvalidName},
		{Info{Name: "/chat"}, ErrInvalidInfo},
		{Info{Name: "/chat", Versions: many}, ErrInvalidInfo},
		{Info{Name: "/chat", Versions: []string{"1", "1.0"}}, ErrInvalidInfo},
		{Info{Name: "/chat", Versions: []string{"1", "v2"}}, ErrInvalidVersion},
	}
	for _, tt := range tests {
		err := tt.info.Validate()
		if tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
			t.Errorf("Validate(%q, %q) = %v, want %v", truncate(tt.info.Name), tt.info.Versions, err, tt.want)
		}
	}
}

func TestRegistry(t *testing.T) {
	var r Registry // zero value is usable
	versions := []string{"1.0", "2.0"}
	if err := r.Register(Info{Name: "/b", Versions: versions}); err != nil {
		t.Fatal(err)
	}
	versions[0] = "changed" // the registry keeps its own copy
	if err := r.Register(Info{Name: "/a", Versions: []string{"1"}}); err != nil {
		t.Fatal(err)
	}
	if err := r.Register(Info{Name: "/b", Versions: []string{"3"}}); !errors.Is(err, ErrDuplicateProtocol) {
		t.Fatalf("duplicate Register = %v", err)
	}
	if err := r.Register(Info{Name: "bad", Versions: []string{"3"}}); !errors.Is(err, ErrInvalidName) {
		t.Fatalf("invalid Register = %v", err)
	}
	info, ok := r.Lookup("/b")
	if !ok || !slices.Equal(info.Versions, []string{"1.0", "2.0"}) {
		t.Fatalf("Lookup = %+v, %v", info, ok)
	}
	info.Versions[0] = "mutated"
	if info, _ := r.Lookup("/b"); info.Versions[0] != "1.0" {
		t.Fatal("Lookup returned the registry's own slice")
	}
	if _, ok := r.Lookup("/none"); ok {
		t.Fatal("Lookup of unknown name succeeded")
	}
	if got := r.Names(); !slices.Equal(got, []string{"/a", "/b"}) {
		t.Fatalf("Names = %q", got)
	}
	if !r.Unregister("/a") || r.Unregister("/a") {
		t.Fatal("Unregister results wrong")
	}
	if got := r.Names(); !slices.Equal(got, []string{"/b"}) {
		t.Fatalf("Names after Unregister = %q", got)
	}
}

func TestRegistryConcurrent(t *testing.T) {
	r := NewRegistry()
	var wg sync.WaitGroup
	errs := make(chan error, 8*50)
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				name := fmt.Sprintf("/p%d", i)
				err := r.Register(Info{Name: name, Versions: []string{"1"}})
				if err != nil && !errors.Is(err, ErrDuplicateProtocol) {
					errs <- err
				}
				if err == nil {
					errs <- nil
				}
				r.Lookup(name)
				_ = r.Names()
				_ = g
			}
		})
	}
	wg.Wait()
	close(errs)
	successes := 0
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
		successes++
	}
	if successes != 50 || len(r.Names()) != 50 {
		t.Fatalf("%d successful registrations, %d names; want 50", successes, len(r.Names()))
	}
}
