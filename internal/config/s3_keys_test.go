package config

import (
	"strings"
	"testing"
)

// sink.iceberg.s3's access_key_id and secret_access_key go together: one
// without the other (a secret from an empty variable) was accepted, and
// the warehouse was reached with the AWS SDK's own credentials (iceberg-go
// uses the pair only when both are set) or refused at the first open,
// not at startup naming the key.
func TestIcebergS3KeyPairIsBothOrNeither(t *testing.T) {
	const base = "kafka: {topics: [t]}\nsink: {type: iceberg, iceberg: {warehouse: 's3://lake/wh', s3: {endpoint: 'http://127.0.0.1:9000', "
	for y, want := range map[string]string{
		"access_key_id: AKIA}}}":    "sink.iceberg.s3.secret_access_key: set both access_key_id and secret_access_key, or neither",
		"secret_access_key: s3c}}}": "sink.iceberg.s3.secret_access_key: set both access_key_id and secret_access_key, or neither",
	} {
		_, err := loadChecked(t, base+y)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", y, err, want)
		}
	}
	t.Setenv("TRACELAKE_SINK_ICEBERG_S3_SECRET_ACCESS_KEY", "")
	_, err := loadChecked(t, base+"access_key_id: AKIA, secret_access_key: in-the-file}}}")
	if err == nil || !strings.Contains(err.Error(), "sink.iceberg.s3.secret_access_key: set both") {
		t.Errorf("secret from an empty variable: %v", err)
	}
	t.Setenv("TRACELAKE_SINK_ICEBERG_S3_SECRET_ACCESS_KEY", "s3c")
	if _, err := loadChecked(t, base+"access_key_id: AKIA}}}"); err != nil {
		t.Errorf("both set: %v", err)
	}
}
