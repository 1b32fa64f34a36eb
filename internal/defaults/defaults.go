// Package defaults fills the zero fields of Config structs with their defaults.
package defaults

// Set sets *v to d if *v is the zero value of its type.
func Set[T comparable](v *T, d T) {
	var zero T
	if *v == zero {
		*v = d
	}
}
