// Command native stands in for a mobile app of the BFF: what an app does on
// its own, with the standard library and go-jose only, to hold a session
// bound to a key it keeps (DPoP, RFC 9449). docs/native-apps.md describes
// each request, and the same steps on iOS and Android.
//
// On its first run it makes a P-256 key and keeps it in DIR/key.pem (0600;
// a key file others may read is refused). A login binds a session to that
// key: the BFF answers tokenType "DPoP", and from then on every request
// carries "Authorization: DPoP <sessionToken>" and a new proof of the key
// (a "DPoP" header: a JWT over the method, the URL, the time and the
// token's hash). The session is kept in DIR/session.json (0600). The token
// alone opens nothing: whoever copies it lacks the key.
//
// Against make run (auth.mode dev):
//
//	go run ./examples/native login -dev-user alice
//	go run ./examples/native events -n 2 -for 1m &   # the payment's changes
//	go run ./examples/native pay 12.5 ILS
//	go run ./examples/native payments
//	go run ./examples/native call /api/v2/data/accounts
//	go run ./examples/native logout
//
// Against a BFF with an OpenID provider, register the loopback redirect
// (auth.mobile_redirect_uris: ["http://127.0.0.1:8765/callback"]) and log in
// in the system browser (RFC 8252):
//
//	go run ./examples/native -bff https://bff.example.com login -open
//
// Global flags: -bff URL (env BFF_URL, default http://localhost:8080) and
// -dir DIR (env BFF_NATIVE_DIR, default the user's configuration directory's
// bff-native). Errors are the BFF's problem code and detail
// (docs/errors.md); the exit status is 1, or 2 for a wrong command line.
package main
