package hardening

import "strings"

// AllowAnnotation on an eligible ConfigMap names the dangerous fields its
// configuration may set anyway ("tlsCipherSuites", several separated by
// commas), or says "true" for every field; each allowed field is then a
// warning. It never lifts forbiddenDynamicFields.
const AllowAnnotation = "nodeguard.dev/allow-dangerous-fields"

// Allowance is what an AllowAnnotation value allows.
type Allowance struct {
	all    bool
	fields map[string]bool
}

// ParseAllowance reads an AllowAnnotation value; "" allows nothing.
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
