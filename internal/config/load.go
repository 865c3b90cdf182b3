package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// EnvPrefix starts the name of every environment override.
const EnvPrefix = "BFF_"

// maxFileBytes bounds the configuration file; a real one is a few KiB.
const maxFileBytes = 1 << 20

// maxNodes bounds the YAML nodes one Load visits, so that aliases cannot
// expand a small file into an enormous one ("billion laughs").
const maxNodes = 100_000

// Error is one configuration problem. Its message names the key (and the
// environment variable, when the value came from one) and never holds a
// secret's value.
type Error struct {
	Key string // dotted key path, e.g. "upstream.routes[2].prefix"; "" for the document itself
	Env string // the BFF_* variable the value came from, if any
	Msg string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("config: ")
	if e.Key != "" {
		b.WriteString(e.Key)
		if e.Env != "" {
			b.WriteString(" (from " + e.Env + ")")
		}
		b.WriteString(": ")
	} else if e.Env != "" {
		b.WriteString(e.Env + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Load reads the YAML file at path (path "" means defaults only), applies
// the BFF_* environment overrides read through getenv, fills defaults,
// derives the dependent keys, and validates. An empty environment value
// counts as unset; environment values win over the file.
//
// Every error names the key it is about and never holds a secret's value.
// Validation problems are reported together, joined with errors.Join.
func Load(path string, getenv func(string) string) (*Config, error) {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	var root *yaml.Node
	if path != "" {
		var err error
		if root, err = readFile(path); err != nil {
			return nil, err
		}
	}
	if root == nil {
		root = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	}

	d := &decoder{origin: map[*yaml.Node]string{}, seen: map[string]bool{}}
	envKeys, err := d.splice(root, getenv)
	if err != nil {
		return nil, err
	}

	c := Defaults()
	if err := d.decode(root, reflect.ValueOf(&c).Elem(), "", ""); err != nil {
		return nil, err
	}
	c.derive(d.seen)
	if err := c.Validate(); err != nil {
		return nil, annotate(err, envKeys)
	}
	return &c, nil
}

// LoadEnviron is Load with the environment given as os.Environ returns it
// ("NAME=value" entries). Before loading, it refuses every BFF_* variable
// that names no configuration key (CheckEnvironNames), so that a misspelt
// override such as BFF_UPSTREAM_TIMOUT=5s is not silently ignored. When a
// name appears twice, the first entry wins, as with os.Getenv.
func LoadEnviron(path string, environ []string) (*Config, error) {
	if err := CheckEnvironNames(environ); err != nil {
		return nil, err
	}
	vars := make(map[string]string, len(environ))
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		if _, dup := vars[name]; !dup {
			vars[name] = value
		}
	}
	return Load(path, func(name string) string { return vars[name] })
}

// CheckEnvironNames refuses every variable of environ ("NAME=value"
// entries, as os.Environ returns them) whose name starts with BFF_ but is
// not the variable of a configuration key, whatever its value, even empty.
// Each problem is an *Error naming the variable (never its value, which may
// be a secret), with a suggestion when a key's variable is close; they are
// joined with errors.Join. It returns nil when there are none.
func CheckEnvironNames(environ []string) error {
	known := map[string]bool{}
	var names []string
	for _, k := range envKeys() {
		known[k.name] = true
		names = append(names, strings.TrimPrefix(k.name, EnvPrefix))
	}
	var errs []error
	reported := map[string]bool{}
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, EnvPrefix) || known[name] || reported[name] {
			continue
		}
		reported[name] = true
		msg := "names no configuration key"
		rest := strings.ToUpper(strings.TrimPrefix(name, EnvPrefix))
		if r, ok := replacedEnv[rest]; ok {
			errs = append(errs, &Error{Env: name, Msg: r})
			continue
		}
		if rest == "PORT" || strings.HasPrefix(rest, "PORT_") || strings.HasPrefix(rest, "SERVICE_") {
			msg += " (a Kubernetes service link for a Service named bff? set enableServiceLinks: false in the pod spec)"
		} else if s := suggestEnv(rest, names); s != "" {
			msg += fmt.Sprintf(" (did you mean %s%s?)", EnvPrefix, s)
		}
		errs = append(errs, &Error{Env: name, Msg: msg + "; every BFF_ variable must be a key's override (see docs/configuration.md)"})
	}
	return errors.Join(errs...)
}

// suggestEnv returns the variable name (without BFF_) that rest most
// likely meant: one within edit distance 2, else the only one that extends
// it ("ADMIN_TOKEN" -> "ADMIN_TOKEN_FILE"), else "".
func suggestEnv(rest string, names []string) string {
	if s := closest(rest, names); s != "" {
		return s
	}
	var longer []string
	for _, n := range names {
		if strings.HasPrefix(n, rest+"_") {
			longer = append(longer, n)
		}
	}
	if len(longer) == 1 {
		return longer[0]
	}
	return ""
}

// readFile parses the file into a node tree. It returns nil for a file
// holding no document.
func readFile(path string) (*yaml.Node, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("config: reading %s: %w", path, err)
	}
	if len(data) > maxFileBytes {
		return nil, fmt.Errorf("config: %s: larger than %d bytes", path, maxFileBytes)
	}
	doc, err := parseYAML(data)
	if err != nil {
		return nil, &Error{Msg: fmt.Sprintf("%s: %v", path, err)}
	}
	return doc, nil
}

// parseYAML parses exactly one YAML document and returns its root node, or
// nil when there is none. Parser messages name a line and a problem, never
// the text around it, so they are safe to show even for a file of secrets.
func parseYAML(data []byte) (n *yaml.Node, err error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, err
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, err
		}
		return nil, errors.New("holds more than one YAML document")
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, nil
	}
	return doc.Content[0], nil
}

// envKey is one entry of the override table: a key path and its variable.
type envKey struct {
	path string // "upstream.retry.max_attempts"
	name string // "BFF_UPSTREAM_RETRY_MAX_ATTEMPTS"
	typ  reflect.Type
}

// envKeys lists every key path of Config (leaves and sections alike, but not
// the fields inside list entries) in declaration order, parents before
// children, so a more specific variable is applied after, and wins over, a
// section's.
func envKeys() []envKey {
	var out []envKey
	var walk func(t reflect.Type, prefix string)
	walk = func(t reflect.Type, prefix string) {
		for i := range t.NumField() {
			f := t.Field(i)
			name := yamlName(f)
			if name == "" {
				continue
			}
			path := prefix + name
			out = append(out, envKey{
				path: path,
				name: EnvPrefix + strings.ToUpper(strings.ReplaceAll(path, ".", "_")),
				typ:  f.Type,
			})
			if f.Type.Kind() == reflect.Struct {
				walk(f.Type, path+".")
			}
		}
	}
	walk(reflect.TypeFor[Config](), "")
	return out
}

// yamlName returns the key a struct field is read from, or "" for a field
// with no yaml tag or tagged "-".
func yamlName(f reflect.StructField) string {
	if !f.IsExported() {
		return ""
	}
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if name == "-" {
		return ""
	}
	return name
}

// decoder walks a YAML node tree against the Config struct, so that every
// error can name its key path.
type decoder struct {
	origin map[*yaml.Node]string // nodes spliced in from the environment -> variable
	seen   map[string]bool       // key paths present in the file or environment
	nodes  int
}

// splice writes every set BFF_* variable into the tree at its key path. It
// returns the key paths set from the environment and their variables.
func (d *decoder) splice(root *yaml.Node, getenv func(string) string) (map[string]string, error) {
	set := map[string]string{}
	for _, k := range envKeys() {
		v := getenv(k.name)
		if v == "" {
			continue
		}
		var n *yaml.Node
		switch k.typ.Kind() {
		case reflect.Struct, reflect.Slice:
			parsed, err := parseYAML([]byte(v))
			if err != nil {
				return nil, &Error{Key: k.path, Env: k.name, Msg: fmt.Sprintf("invalid YAML value: %v", err)}
			}
			if parsed == nil {
				parsed = &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}
			}
			n = parsed
		default:
			// Scalars are taken as they are: no YAML quoting or null.
			n = &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v}
		}
		d.origin[n] = k.name
		set[k.path] = k.name
		setPath(root, strings.Split(k.path, "."), n)
	}
	return set, nil
}

// setPath puts value at the key path below root, creating (or replacing
// null) sections on the way. A section the file gave a non-mapping value is
// left alone: decoding reports it.
func setPath(root *yaml.Node, path []string, value *yaml.Node) {
	m := root
	for i, key := range path {
		if m.Kind == yaml.ScalarNode && m.ShortTag() == "!!null" {
			*m = yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		}
		if m.Kind != yaml.MappingNode {
			return
		}
		var next *yaml.Node
		for j := 0; j+1 < len(m.Content); j += 2 {
			if k := m.Content[j]; k.Kind == yaml.ScalarNode && k.Value == key {
				next = m.Content[j+1]
				if i == len(path)-1 {
					m.Content[j+1] = value
				}
			}
		}
		if i == len(path)-1 {
			if next == nil {
				m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, value)
			}
			return
		}
		if next == nil {
			next = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
			m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, next)
		}
		for next.Kind == yaml.AliasNode && next.Alias != nil {
			next = next.Alias
		}
		m = next
	}
}

var durationType = reflect.TypeFor[time.Duration]()

// decode stores node n into v, which holds the default. path names the key
// for errors; env is the variable the value came from, if any.
func (d *decoder) decode(n *yaml.Node, v reflect.Value, path, env string) error {
	if e, ok := d.origin[n]; ok {
		env = e
	}
	for n.Kind == yaml.AliasNode {
		if n.Alias == nil {
			return &Error{Key: path, Env: env, Msg: "unresolved alias"}
		}
		n = n.Alias
	}
	if d.nodes++; d.nodes > maxNodes {
		return &Error{Key: path, Env: env, Msg: fmt.Sprintf("more than %d YAML nodes (aliases expand too far)", maxNodes)}
	}
	if path != "" {
		d.seen[path] = true
	}
	bad := func(format string, args ...any) error {
		return &Error{Key: path, Env: env, Msg: fmt.Sprintf(format, args...)}
	}

	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		// "url:" reads as empty, so null is the zero value (an empty
		// list, "", 0, false), except for a section, which keeps its
		// defaults: "upstream:" alone changes nothing.
		switch v.Kind() {
		case reflect.Struct:
		case reflect.Slice:
			v.Set(reflect.MakeSlice(v.Type(), 0, 0))
		default:
			v.SetZero()
		}
		return nil
	}

	switch {
	case v.Type() == durationType:
		if n.Kind != yaml.ScalarNode {
			return bad("expected a duration such as 15s, got %s", kindName(n))
		}
		dur, msg := parseDuration(n.Value)
		if msg != "" {
			return bad("%s", msg)
		}
		v.SetInt(int64(dur))
		return nil
	case v.Kind() == reflect.String:
		if n.Kind != yaml.ScalarNode {
			return bad("expected a string, got %s", kindName(n))
		}
		v.SetString(n.Value)
		return nil
	case v.Kind() == reflect.Bool:
		if n.Kind != yaml.ScalarNode {
			return bad("expected true or false, got %s", kindName(n))
		}
		b, err := strconv.ParseBool(n.Value)
		if err != nil {
			return bad("invalid boolean %q (want true or false)", n.Value)
		}
		v.SetBool(b)
		return nil
	case v.CanInt():
		if n.Kind != yaml.ScalarNode {
			return bad("expected an integer, got %s", kindName(n))
		}
		i, err := strconv.ParseInt(strings.ReplaceAll(n.Value, "_", ""), 10, v.Type().Bits())
		if err != nil {
			return bad("invalid integer %q", n.Value)
		}
		v.SetInt(i)
		return nil
	case v.Kind() == reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return bad("expected a list, got %s", kindName(n))
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, item := range n.Content {
			if err := d.decode(item, s.Index(i), fmt.Sprintf("%s[%d]", path, i), env); err != nil {
				return err
			}
		}
		v.Set(s)
		return nil
	case v.Kind() == reflect.Struct:
		if n.Kind != yaml.MappingNode {
			if path == "" {
				return bad("the document must be a mapping of keys, got %s", kindName(n))
			}
			return bad("expected a mapping of keys, got %s", kindName(n))
		}
		return d.decodeStruct(n, v, path, env)
	}
	return bad("unsupported field type %s", v.Type()) // a programming error in the Config types
}

func (d *decoder) decodeStruct(n *yaml.Node, v reflect.Value, path, env string) error {
	t := v.Type()
	fields := map[string]int{}
	var names []string
	for i := range t.NumField() {
		if name := yamlName(t.Field(i)); name != "" {
			fields[name] = i
			names = append(names, name)
		}
	}
	prefix := ""
	if path != "" {
		prefix = path + "."
	}
	done := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, vn := n.Content[i], n.Content[i+1]
		keyEnv := env
		if e, ok := d.origin[vn]; ok {
			keyEnv = e
		}
		for kn.Kind == yaml.AliasNode && kn.Alias != nil {
			kn = kn.Alias
		}
		if kn.Kind != yaml.ScalarNode {
			return &Error{Key: path, Env: keyEnv, Msg: fmt.Sprintf("a key must be a string, got %s", kindName(kn))}
		}
		key := prefix + kn.Value
		idx, ok := fields[kn.Value]
		if !ok {
			msg := fmt.Sprintf("unknown key %q", key)
			if r, ok := replacedKeys[key]; ok {
				return &Error{Env: keyEnv, Msg: fmt.Sprintf("key %q %s", key, r)}
			}
			if s := closest(kn.Value, names); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", prefix+s)
			}
			return &Error{Env: keyEnv, Msg: msg}
		}
		if done[kn.Value] {
			return &Error{Env: keyEnv, Msg: fmt.Sprintf("key %q is set twice", key)}
		}
		done[kn.Value] = true
		if err := d.decode(vn, v.Field(idx), key, env); err != nil {
			return err
		}
	}
	return nil
}

// parseDuration accepts Go durations ("15s", "1h30m"). A bare number other
// than 0 is refused: "timeout: 15" is more likely meant as seconds than as
// nanoseconds. On failure it returns the message to report.
func parseDuration(s string) (time.Duration, string) {
	if s == "0" {
		return 0, ""
	}
	if _, err := strconv.ParseFloat(s, 64); err == nil {
		return 0, fmt.Sprintf("invalid duration %q (a unit is required, e.g. 15s, 100ms, 1h)", s)
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Sprintf("invalid duration %q", s)
	}
	return d, ""
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return "a scalar"
	}
	return "an alias"
}

// closest returns the candidate within edit distance 2 of s, if any.
func closest(s string, candidates []string) string {
	best, bestD := "", 3
	for _, c := range candidates {
		if d := editDistance(s, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the optimal-string-alignment distance: insertions,
// deletions, substitutions and transpositions ("tiemout") each count one.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 64
	}
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

// derive fills the keys whose defaults depend on other keys and normalises
// values that have one canonical spelling. seen holds the key paths given in
// the file or the environment.
func (c *Config) derive(seen map[string]bool) {
	if c.PublicURL == "" && c.Env == EnvDevelopment {
		c.PublicURL = DevPublicURL
	}
	c.PublicURL = canonicalOrigin(c.PublicURL)
	for i, o := range c.CORS.AllowedOrigins {
		c.CORS.AllowedOrigins[i] = canonicalOrigin(o)
	}
	if c.Upstream.BaseURL != "/" {
		c.Upstream.BaseURL = strings.TrimSuffix(c.Upstream.BaseURL, "/")
	}
	for i := range c.Upstream.Routes {
		for j, m := range c.Upstream.Routes[i].Methods {
			c.Upstream.Routes[i].Methods[j] = strings.ToUpper(m)
		}
	}
	if c.Session.MobileDPoP == "" {
		c.Session.MobileDPoP = MobileDPoPOptional
		if c.Env == EnvProduction {
			c.Session.MobileDPoP = MobileDPoPRequired
		}
	}
	if c.Session.CookieName == "" {
		if c.Session.SecureCookie {
			c.Session.CookieName = SecureCookieName
		} else {
			c.Session.CookieName = PlainCookieName
		}
	}
	// The default url is for the single-node case: configuring Sentinel or
	// Cluster without also clearing it should not be an error.
	if !seen["redis.url"] && (c.Redis.Sentinel.Master != "" || len(c.Redis.Sentinel.Addrs) > 0 || len(c.Redis.ClusterAddrs) > 0) {
		c.Redis.URL = ""
	}
}

// canonicalOrigin lower-cases an origin's scheme and host and drops a lone
// trailing "/", so it compares equal to a browser's Origin header. Anything
// that is not of that shape is returned unchanged for Validate to report.
func canonicalOrigin(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
		return s
	}
	if u.Path != "" && u.Path != "/" {
		return s
	}
	return strings.ToLower(u.Scheme) + "://" + strings.ToLower(u.Host)
}

// annotate adds the environment variable to validation errors about keys
// set (directly or through a section) from the environment.
func annotate(err error, set map[string]string) error {
	if len(set) == 0 {
		return err
	}
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	for _, e := range errs {
		var ce *Error
		if !errors.As(e, &ce) || ce.Env != "" {
			continue
		}
		for p := ce.Key; p != ""; p = parentKey(p) {
			if name, ok := set[p]; ok {
				ce.Env = name
				break
			}
		}
	}
	return err
}

// parentKey returns the key path one level up: "a.b[2].c" -> "a.b[2]" ->
// "a.b" -> "a" -> "".
func parentKey(p string) string {
	i := strings.LastIndexAny(p, ".[")
	if i < 0 {
		return ""
	}
	return p[:i]
}

// replacedKeys are keys of earlier versions that now mean nothing, with
// what replaced them: set, they are refused with that message rather than
// as unknown.
var replacedKeys = map[string]string{
	"upstream.token_cache_entries": fmt.Sprintf("was replaced by upstream.token_cache_bytes: the in-process token cache is bounded by memory, not by a count (default %d, 128 MiB; 0 still turns it off)", DefaultTokenCacheBytes),
	"session.cache_entries":        fmt.Sprintf("was replaced by session.cache_bytes: the in-process session cache is bounded by memory, not by a count (default %d, 64 MiB; 0 still turns it off)", DefaultSessionCacheBytes),
}

// replacedEnv is replacedKeys by environment variable (without EnvPrefix).
var replacedEnv = func() map[string]string {
	m := map[string]string{}
	for k, msg := range replacedKeys {
		m[strings.ToUpper(strings.ReplaceAll(k, ".", "_"))] = "overrides " + k + ", which " + msg
	}
	return m
}()
