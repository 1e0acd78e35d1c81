package v1

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestLabelValue(t *testing.T) {
	short := "nightly-20261122"
	if got := LabelValue(short); got != short {
		t.Errorf("LabelValue(%q) = %q", short, got)
	}
	long := strings.Repeat("a", 100)
	got := LabelValue(long)
	if len(got) != 63 || !strings.HasPrefix(got, long[:57]) || len(validation.IsValidLabelValue(got)) != 0 {
		t.Errorf("LabelValue(100 chars) = %q (%d chars)", got, len(got))
	}
	if LabelValue(long+"b") == got {
		t.Errorf("two long names share a label value")
	}
}
