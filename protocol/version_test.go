package protocol

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

func TestCompareVersions(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"1", "1", 0},
		{"1", "1.0", 0},
		{"1.0.0", "1", 0},
		{"01.2", "1.02", 0},
		{"10.0", "9.0", 1},
		{"9.0", "10.0", -1},
		{"1.10", "1.9", 1},
		{"1.9", "1.10", -1},
		{"2", "1.999", 1},
		{"1.0.1", "1", 1},
		{"1", "1.0.1", -1},
		{"0", "0.0.0", 0},
		{"123456789", "123456788.9", 1},
		{"0.1", "0.01", 0},
		{"1.2.3.4.5", "1.2.3.4.6", -1},
		// invalid versions sort first and among themselves as strings
		{"", "0", -1},
		{"0", "x", 1},
		{"a", "b", -1},
		{"1..2", "1.2", -1},
		{"b", "a", 1},
	}
	for _, tt := range tests {
		if got := CompareVersions(tt.a, tt.b); got != tt.want {
			t.Errorf("CompareVersions(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
		if got := CompareVersions(tt.b, tt.a); got != -tt.want {
			t.Errorf("CompareVersions(%q, %q) = %d, want %d", tt.b, tt.a, got, -tt.want)
		}
		va, erra := ParseVersion(tt.a)
		vb, errb := ParseVersion(tt.b)
		if erra == nil && errb == nil {
			if got := va.Compare(vb); got != tt.want {
				t.Errorf("Version(%q).Compare(%q) = %d, want %d", tt.a, tt.b, got, tt.want)
			}
		}
	}
}

func TestValidVersion(t *testing.T) {
	valid := []string{"0", "1", "1.0", "10.20.30", "123456789", "1.2.3.4.5.6.7.8.9.10.11", "000000001"}
	invalid := []string{"", ".", "1.", ".1", "1..2", "v1", "1.0-beta", " 1", "1 ", "1234567890",
		"1.2.3.4.5.6.7.8.9.10.11.1", "+1", "-1", "1,0", "١"}
	for _, v := range valid {
		if !ValidVersion(v) {
			t.Errorf("ValidVersion(%q) = false", v)
		}
		if _, err := ParseVersion(v); err != nil {
			t.Errorf("ParseVersion(%q): %v", v, err)
		}
	}
	for _, v := range invalid {
		if ValidVersion(v) {
			t.Errorf("ValidVersion(%q) = true", v)
		}
		if _, err := ParseVersion(v); !errors.Is(err, ErrInvalidVersion) {
			t.Errorf("ParseVersion(%q) error = %v, want ErrInvalidVersion", v, err)
		}
	}
}

func TestParseVersion(t *testing.T) {
	v, err := ParseVersion("1.020.3")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(v, Version{1, 20, 3}) {
		t.Fatalf("ParseVersion = %v", v)
	}
	if s := v.String(); s != "1.20.3" {
		t.Fatalf("String = %q", s)
	}
	v, err = ParseVersion("999999999.0")
	if err != nil || v[0] != 999999999 {
		t.Fatalf("ParseVersion max component = %v, %v", v, err)
	}
}

func TestSelectHighest(t *testing.T) {
	tests := []struct {
		local, remote []string
		want          string
		ok            bool
	}{
		{[]string{"1.0", "2.0"}, []string{"1.0", "2.0"}, "2.0", true},
		{[]string{"9.0", "10.0"}, []string{"10.0", "9.0"}, "10.0", true},
		{[]string{"1.9", "1.10"}, []string{"1.9", "1.10", "1.11"}, "1.10", true},
		{[]string{"1", "2"}, []string{"2.0", "3"}, "2", true},
		{[]string{"1.0"}, []string{"2.0"}, "", false},
		{[]string{"3", "1"}, []string{"1", "3"}, "3", true},
		{nil, []string{"1"}, "", false},
		{[]string{"x", "1"}, []string{"x", "1"}, "1", true},
	}
	for _, tt := range tests {
		got, ok := SelectHighest(tt.local, tt.remote)
		if got != tt.want || ok != tt.ok {
			t.Errorf("SelectHighest(%q, %q) = %q, %v; want %q, %v", tt.local, tt.remote, got, ok, tt.want, tt.ok)
		}
	}
}

func TestCompareVersionsNoAlloc(t *testing.T) {
	allocs := testing.AllocsPerRun(100, func() {
		_ = CompareVersions("1.10.3", "1.9.12")
	})
	if allocs != 0 {
		t.Fatalf("CompareVersions allocates %v times", allocs)
	}
}

func ExampleCompareVersions() {
	fmt.Println(CompareVersions("10.0", "9.0"))
	fmt.Println(CompareVersions("1.9", "1.10"))
	fmt.Println(CompareVersions("1", "1.0"))
	// Output:
	// 1
	// -1
	// 0
}

func ExampleSelectHighest() {
	v, ok := SelectHighest([]string{"1.0", "9.0", "10.0"}, []string{"9.0", "10.0", "11.0"})
	fmt.Println(v, ok)
	// Output: 10.0 true
}
