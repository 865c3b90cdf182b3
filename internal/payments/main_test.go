package payments

import (
	"testing"

	"github.com/fintech-bff/bff/internal/testing/leaktest"
)

func TestMain(m *testing.M) { leaktest.Main(m) }
