package pipeline

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/tracelake/tracelake/internal/obs"
)

// Two moments of UNKNOWN_TOPIC_ID apart (a topic_regex topic just
// created, before its producers start; a quiet topic whose broker lagged
// a moment on a leader move) are two waits, not one: the client hands a
// poll a partition only with records or an error, so a topic that
// answers again while nothing is produced to it shows up in no poll, and
// the second moment found the wait of the first long past and stopped
// the run at once. Found by a review.
func TestUnknownTopicBlipsApartDoNotStopTheRun(t *testing.T) {
	var stopped []error
	w := &Worker{
		opt: Options{UnknownTopicWait: 200 * time.Millisecond, Metrics: obs.New(),
			Fatal: func(err error) { stopped = append(stopped, err) }},
		log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	none := map[string]bool{}
	blip := map[string]bool{"fresh": true}

	// A topic_regex topic just created: a broker answers its first
	// fetches UNKNOWN_TOPIC_ID for a moment, then answers them without an
	// error, but there is no record yet, so no poll names the topic.
	w.topicsUnknown(blip, none)
	for deadline := time.Now().Add(400 * time.Millisecond); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		w.topicsUnknown(none, none) // healthy polls (other topics, or empty)
	}
	// Later (two UnknownTopicWaits here; hours in production), a second
	// moment of UNKNOWN_TOPIC_ID, the first poll of it.
	w.topicsUnknown(blip, none)
	if len(stopped) > 0 {
		t.Errorf("the run stopped on the first poll of a second, brief UNKNOWN_TOPIC_ID (the wait counted from the first one, %v before, the topic answered without errors in between): %v",
			400*time.Millisecond, stopped[0])
	}
}
