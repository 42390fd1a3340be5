package config

import (
	"strings"
	"testing"
)

// A misspelt variable of a top-level key, or one whose section is
// misspelt, is refused naming the variable it is a letter or two from:
// being in no section's namespace it passed as "not a setting", and
// TRACELAKE_SHUTDOWN_TIMOUT=5s left shutdown_timeout at 30s without a
// word. Names far from every setting's (TRACELAKE_CPU_PROFILE) still pass.
func TestMisspeltTopLevelEnvVariableIsNamed(t *testing.T) {
	t.Setenv("TRACELAKE_SHUTDOWN_TIMOUT", "5s")
	t.Setenv("TRACELAKE_WORKER", "4")
	t.Setenv("TRACELAKE_KAFK_GROUP", "g")
	t.Setenv("TRACELAKE_CPU_PROFILE", "/tmp/p")
	_, err := FromFile("")
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	for _, want := range []string{
		"TRACELAKE_SHUTDOWN_TIMOUT: no setting has this name (did you mean TRACELAKE_SHUTDOWN_TIMEOUT?)",
		"TRACELAKE_WORKER: no setting has this name (did you mean TRACELAKE_WORKERS?)",
		"TRACELAKE_KAFK_GROUP: no setting has this name (did you mean TRACELAKE_KAFKA_GROUP?)",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "TRACELAKE_CPU_PROFILE") {
		t.Errorf("a variable that is no setting was refused:\n%s", msg)
	}
}
