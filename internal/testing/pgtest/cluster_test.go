package pgtest

import (
	"strings"
	"testing"
)

// TestMissingProgramsFail: without PostgreSQL's programs a test that needs
// a private server fails, saying what to install, and never skips.
func TestMissingProgramsFail(t *testing.T) {
	t.Setenv("BFF_TEST_POSTGRES_BIN", t.TempDir())
	if _, err := binDir(); err == nil || !strings.Contains(err.Error(), "lacks postgres") {
		t.Errorf("an empty BFF_TEST_POSTGRES_BIN: %v", err)
	}
}
