package hardening

import "strings"

// Allowance is what a contract.AllowDangerousFieldsAnnotation value allows.
type Allowance struct {
	all    bool
	fields map[string]bool
}

// ParseAllowance reads a contract.AllowDangerousFieldsAnnotation value; "" allows nothing.
func ParseAllowance(value string) Allowance {
	a := Allowance{fields: map[string]bool{}}
	for _, part := range strings.Split(value, ",") {
		switch name := strings.TrimSpace(part); name {
		case "":
		case "true":
			a.all = true
		default:
			a.fields[name] = true
		}
	}
	return a
}

// Allows reports whether the allowance lets field be set.
func (a Allowance) Allows(field string) bool { return a.all || a.fields[field] }
