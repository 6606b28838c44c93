package httpserver

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// Check is one named health check; a nil error is healthy.
type Check struct {
	Name  string
	Check func(*http.Request) error
}

// NamedCheck returns a Check.
func NamedCheck(name string, check func(*http.Request) error) Check {
	return Check{Name: name, Check: check}
}

// pingCheck always passes: the server answers.
var pingCheck = NamedCheck("ping", func(*http.Request) error { return nil })

// validateChecks refuses what would make two handlers claim one path, or a
// path that is not the check's name: every check is served at
// /healthz/<name> or /readyz/<name>, and /readyz runs the liveness checks
// too.
func validateChecks(checks []Check) error {
	var errs []error
	seen := map[string]bool{}
	for _, check := range checks {
		switch {
		case !validCheckName(check.Name):
			errs = append(errs, fmt.Errorf("health check name %q: want letters, digits, '-' and '_' only", check.Name))
		case seen[check.Name]:
			errs = append(errs, fmt.Errorf("health check name %q used twice (%q is built in; liveness checks are readiness checks too)", check.Name, pingCheck.Name))
		case check.Check == nil:
			errs = append(errs, fmt.Errorf("health check %q has no function", check.Name))
		}
		seen[check.Name] = true
	}
	return errors.Join(errs...)
}

// validCheckName keeps a name a literal path segment: no wildcard braces,
// slashes, spaces or dot segments for http.ServeMux to read as syntax.
func validCheckName(name string) bool {
	if name == "" {
		return false
	}
	for _, c := range name {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// installChecks serves path (all checks) and path/<name> (one check); the
// checks must have passed validateChecks.
func installChecks(mux *http.ServeMux, path string, checks []Check) {
	mux.Handle(path, checksHandler(path, checks))
	for _, check := range checks {
		mux.Handle(path+"/"+check.Name, checksHandler(path, []Check{check}))
	}
}

// checksHandler answers 200 "ok" when every check passes, and 500 with one
// line per check when one fails; ?verbose gives the lines on success too.
func checksHandler(path string, checks []Check) http.Handler {
	what := strings.TrimPrefix(path, "/")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var report strings.Builder
		failed := false
		for _, check := range checks {
			if err := check.Check(r); err != nil {
				failed = true
				fmt.Fprintf(&report, "[-]%s failed: %v\n", check.Name, err)
			} else {
				fmt.Fprintf(&report, "[+]%s ok\n", check.Name)
			}
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		switch {
		case failed:
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprintf(w, "%s%s check failed\n", report.String(), what)
		case r.URL.Query().Has("verbose"):
			fmt.Fprintf(w, "%s%s check passed\n", report.String(), what)
		default:
			fmt.Fprint(w, "ok")
		}
	})
}
