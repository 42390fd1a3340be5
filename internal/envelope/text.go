package envelope

import "math/rand/v2"

const hexDigits = "0123456789abcdef"

// needsEscape marks the bytes that cannot stand unescaped inside a JSON
// string: the quote, the backslash and control characters.
var needsEscape = func() (t [256]bool) {
	for i := range 0x20 {
		t[i] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

// AppendString appends s as a JSON string. s must be valid UTF-8 (checked by
// the caller); bytes above 0x7F are copied as they are.
func AppendString[S ~string | ~[]byte](dst []byte, s S) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !needsEscape[c] {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// UUIDs makes random (version 4) row ids from a ChaCha8 stream seeded from the
// operating system: unique in practice and ~20x cheaper than crypto/rand per
// id. Not safe for concurrent use; each worker has its own.
type UUIDs struct{ r *rand.ChaCha8 }

// NewUUIDs returns a generator seeded from crypto-quality randomness.
func NewUUIDs() *UUIDs {
	var seed [32]byte
	for i := range 4 {
		v := rand.Uint64() // runtime-seeded from the OS
		for j := range 8 {
			seed[i*8+j] = byte(v >> (8 * j))
		}
	}
	return &UUIDs{r: rand.NewChaCha8(seed)}
}

// Next fills id with a new version-4 UUID.
func (g *UUIDs) Next(id *[16]byte) {
	_, _ = g.r.Read(id[:])
	id[6] = id[6]&0x0f | 0x40
	id[8] = id[8]&0x3f | 0x80
}

// AppendUUID appends id in the canonical 8-4-4-4-12 hex form.
func AppendUUID(dst []byte, id *[16]byte) []byte {
	for i, b := range id {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			dst = append(dst, '-')
		}
		dst = append(dst, hexDigits[b>>4], hexDigits[b&0xF])
	}
	return dst
}
