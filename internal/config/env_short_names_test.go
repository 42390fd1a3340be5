package config

import (
	"strings"
	"testing"
)

// A variable in no section is refused only when it is a misspelling of a
// setting's name, and a four-letter name is a letter or two from many
// words: TRACELAKE_HOME, TRACELAKE_NODE, TRACELAKE_CODE, TRACELAKE_ZONE
// and TRACELAKE_MODEL, which a deployment sets for its own use, were
// refused as TRACELAKE_MODE misspelt, and every command stopped.
func TestShortVariablesNearAShortKeyAreNoSettings(t *testing.T) {
	names := []string{"TRACELAKE_HOME", "TRACELAKE_NODE", "TRACELAKE_CODE", "TRACELAKE_ZONE", "TRACELAKE_MODEL"}
	for _, name := range names {
		t.Setenv(name, "x")
	}
	t.Setenv("TRACELAKE_WORKER", "4") // still a misspelling of TRACELAKE_WORKERS
	_, err := FromFile("")
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	for _, name := range names {
		if strings.Contains(msg, name+":") {
			t.Errorf("%s, no setting, was refused:\n%s", name, msg)
		}
	}
	if !strings.Contains(msg, "TRACELAKE_WORKER: no setting has this name (did you mean TRACELAKE_WORKERS?)") {
		t.Errorf("TRACELAKE_WORKER not refused:\n%s", msg)
	}
}
