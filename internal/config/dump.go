package config

import (
	"bytes"
	"reflect"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

var secretType = reflect.TypeFor[Secret]()

// Dump renders the effective configuration as YAML, in the keys' documented
// order, for `bff -check`. A set secret prints as REDACTED and an empty one
// as "", so the output shows which secrets are configured without their
// values. Durations print as Go durations ("30m"), so the output loads again.
func (c *Config) Dump() string {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(dumpNode(reflect.ValueOf(*c), false)); err != nil {
		// Encoding a tree of plain scalars, lists and mappings cannot fail.
		return "# config: " + err.Error() + "\n"
	}
	_ = enc.Close()
	return b.String()
}

func dumpNode(v reflect.Value, flow bool) *yaml.Node {
	scalar := func(tag, value string) *yaml.Node {
		n := &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: value}
		if tag == "!!str" && value == "" {
			n.Style = yaml.DoubleQuotedStyle
		}
		return n
	}
	var style yaml.Style
	if flow {
		style = yaml.FlowStyle
	}
	switch {
	case v.Type() == secretType:
		if v.String() == "" {
			return scalar("!!str", "")
		}
		return scalar("!!str", Redacted)
	case v.Type() == durationType:
		return scalar("!!str", formatDuration(time.Duration(v.Int())))
	case v.Kind() == reflect.String:
		return scalar("!!str", v.String())
	case v.Kind() == reflect.Bool:
		return scalar("!!bool", strconv.FormatBool(v.Bool()))
	case v.CanInt():
		return scalar("!!int", strconv.FormatInt(v.Int(), 10))
	case v.Kind() == reflect.Slice:
		n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Style: style}
		if v.Type().Elem().Kind() != reflect.Struct {
			n.Style = yaml.FlowStyle
		}
		for i := range v.Len() {
			n.Content = append(n.Content, dumpNode(v.Index(i), true))
		}
		return n
	case v.Kind() == reflect.Struct:
		n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Style: style}
		t := v.Type()
		for i := range t.NumField() {
			name := yamlName(t.Field(i))
			if name == "" {
				continue
			}
			n.Content = append(n.Content, scalar("!!str", name), dumpNode(v.Field(i), flow))
		}
		return n
	}
	return scalar("!!str", "")
}

// formatDuration prints d as time.Duration.String does, without the zero
// tails: 1h, 30m, 1h30m, 1m30s.
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
