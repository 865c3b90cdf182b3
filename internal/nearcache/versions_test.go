package nearcache

import (
	"fmt"
	"testing"
)

func TestVersions(t *testing.T) {
	var v versions
	a := v.of("sess:a")
	v.bump("sess:a", 1)
	if v.of("sess:a") == a {
		t.Fatal("bump(a) left a's version as it was")
	}
	a = v.of("sess:a")
	v.bumpAll(1)
	if v.of("sess:a") == a {
		t.Fatal("bumpAll left a's version as it was")
	}
	// A change of another key leaves a's version alone unless they share
	// a shard: of 1,000 other keys, few may.
	a = v.of("sess:a")
	same := 0
	for i := range 1000 {
		v.bump(fmt.Sprintf("sess:other-%d", i), 1)
		if v.of("sess:a") != a {
			same++
			a = v.of("sess:a")
		}
	}
	if same > 10 {
		t.Fatalf("%d of 1000 changes of other keys changed a's version, want about 1", same)
	}
}
