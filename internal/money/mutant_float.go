package money

import (
	"math"
	"strconv"

	"github.com/fintech-bff/bff/internal/mutant"
)

// floatMinor is the mutant AmountThroughFloat's reading of an amount: the
// bug this package exists to rule out (a decimal read as a float64 and
// rounded to minor units, so a long decimal is accepted as a nearby
// amount). No product build runs it: mutant.Is is false there.
func floatMinor(text string, digits int) (int64, bool) {
	if !mutant.Is(mutant.AmountThroughFloat) {
		return 0, false
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, false
	}
	return int64(math.Round(f * math.Pow10(digits))), true
}
