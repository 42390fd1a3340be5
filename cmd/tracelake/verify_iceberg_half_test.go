package main

import (
	"context"
	"strings"
	"testing"

	iceberggo "github.com/apache/iceberg-go"

	"github.com/tracelake/tracelake/internal/sink/iceberg/icebergtest"
	"github.com/tracelake/tracelake/internal/verify"
)

// An OTLP load-mode instance's load committed its operations (offset 5)
// and then failed to commit its spans; the instance takes no request
// after it (idle, or never restarted), so nothing abandons them: the
// operations of a request its client was told to retry stay, with no
// span, for good. verify said OK, taking them for a load still
// committing its spans. It must say the spans are missing once no
// commit brings them.
func TestIcebergVerifyReportsOperationsWhoseSpansNeverCommit(t *testing.T) {
	ctx := context.Background()
	cfg, ice := loadedGenAIIceberg(t)
	icebergtest.AppendCopy(t, ice.Catalog(), ice.DerivedIdentifier(), iceberggo.EqualTo(iceberggo.Reference("koffset"), int64(4)), map[string]int64{"koffset": 5})
	rep := &verify.Report{OK: true}
	if err := checkIcebergDerived(ctx, cfg, ice, rep); err != nil {
		t.Fatal(err)
	}
	if rep.OK || !strings.Contains(strings.Join(rep.Problems, ";"), "otlp/0 offsets 5-5") {
		t.Errorf("operations whose spans never commit: OK=%v %q; want them reported (otlp/0 offsets 5-5)", rep.OK, rep.Problems)
	}
}
