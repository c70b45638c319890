package finding

import (
	"reflect"
	"testing"
)

func TestVerdictFirst(t *testing.T) {
	fs := []Finding{
		{ID: "a", Severity: Info}, {ID: "b", Severity: Warning}, {ID: "c", Severity: Info},
		{ID: "d", Severity: Critical}, {ID: "e", Severity: Warning}, {ID: "f", Severity: Info},
	}
	VerdictFirst(&Verdict{Because: []string{"f", "c"}}, fs)
	var got []string
	for _, f := range fs {
		got = append(got, f.ID)
	}
	if want := []string{"f", "c", "d", "b", "e", "a"}; !reflect.DeepEqual(got, want) {
		t.Errorf("order %v, want %v (the verdict's in its order, then by severity, ties as drawn)", got, want)
	}
}
