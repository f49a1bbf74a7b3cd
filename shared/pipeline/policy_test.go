package pipeline

import (
	"math"
	"testing"
)

// RetryDelaySeconds is the one R-L6 delay rule for step retries (the engine) and policy
// retries (this package): retry k waits delay, delay·k or delay·2^(k−1), capped.
func TestRetryDelaySeconds(t *testing.T) {
	cases := []struct {
		backoff string
		k       int
		want    float64
	}{
		{"fixed", 1, 2}, {"fixed", 5, 2}, {"none", 3, 2},
		{"linear", 1, 2}, {"linear", 3, 6}, {"linear", 100, 10},
		{"exponential", 1, 2}, {"exponential", 2, 4}, {"exponential", 3, 8}, {"exponential", 4, 10},
		{"exponential", 1000, 10}, // the shift is bounded: no overflow, still the cap
	}
	for _, c := range cases {
		if got := RetryDelaySeconds(2, c.backoff, c.k, 10); got != c.want {
			t.Errorf("RetryDelaySeconds(2, %s, %d, 10) = %v, want %v", c.backoff, c.k, got, c.want)
		}
	}
	if got := RetryDelaySeconds(math.MaxFloat64, "exponential", 62, 300); got != 300 {
		t.Errorf("huge delay = %v, want the cap 300", got)
	}
	a := action{delay: DefaultRetryDelay, backoff: "exponential"}
	if got := retryDelay(a, 40); got != MaxRetryDelay {
		t.Errorf("policy retry 40 waits %v, want MaxRetryDelay %v", got, MaxRetryDelay)
	}
}
