package dpop

// The words the edge reports of device binding, besides a refused proof's
// Reason: the labels of bff_dpop_proofs_total{use} and
// bff_dpop_native_sessions_total{binding} (docs/operations.md), named once
// here, where the metrics and the edge can both import them.

// Use is where a proof was checked.
type Use string

// The uses of a proof.
const (
	UseLogin   Use = "login"   // a token login, binding its session to the proof's key
	UseRequest Use = "request" // a request of a bound session
)

// Binding is how a native session is held: bound to a device's key or not.
type Binding string

// The bindings.
const (
	BindingDPoP   Binding = "dpop"   // bound to the key of the login's proof (token type DPoP)
	BindingBearer Binding = "bearer" // unbound (token type Bearer)
)

// BindingOf is the binding of a session bound to the key whose thumbprint
// is jkt: BindingBearer when jkt is "".
func BindingOf(jkt string) Binding {
	if jkt == "" {
		return BindingBearer
	}
	return BindingDPoP
}
