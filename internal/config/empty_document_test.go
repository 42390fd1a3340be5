package config

import "testing"

// 36e9d04 refuses a second YAML document, to stop settings after a "---"
// being dropped. A trailing "---" with nothing after it (as templating
// tools and concatenated manifests leave) is an empty document that holds
// no setting, and the file loaded before that change: it must still load.
// yaml.v3 decodes it as a document holding one !!null scalar, which
// decodeFile counts as a second document (len(second.Content) > 0).
func TestTrailingEmptyDocumentIsNotASecondDocument(t *testing.T) {
	for _, text := range []string{
		"kafka: {topics: [a]}\n---\n",
		"kafka: {topics: [a]}\n---\n# end\n",
	} {
		if _, err := loadChecked(t, text); err != nil {
			t.Errorf("%q: %v; want it loaded (the document after --- is empty)", text, err)
		}
	}
}
