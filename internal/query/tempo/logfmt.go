package tempo

import (
	"fmt"
	"strconv"
	"strings"
)

// parseLogfmt reads the tags parameter: logfmt key=value pairs, values
// bare or double-quoted with Go escapes, a key set twice refused (as
// pkg/api/http.go reads it with go-logfmt). A key alone has the value "".
func parseLogfmt(s string) (map[string]string, error) {
	out := map[string]string{}
	i := 0
	for {
		for i < len(s) && s[i] == ' ' {
			i++
		}
		if i >= len(s) {
			return out, nil
		}
		j := i
		for j < len(s) && s[j] != '=' && s[j] != ' ' && s[j] != '"' {
			j++
		}
		if j == i {
			return nil, fmt.Errorf("unexpected %q at pos %d", s[j], j+1)
		}
		key := s[i:j]
		val := ""
		if j < len(s) && s[j] == '=' {
			j++
			if j < len(s) && s[j] == '"' {
				k := j + 1
				for k < len(s) && s[k] != '"' {
					if s[k] == '\\' {
						k++
					}
					k++
				}
				if k >= len(s) {
					return nil, fmt.Errorf("unterminated quoted value at pos %d", j+1)
				}
				v, err := strconv.Unquote(s[j : k+1])
				if err != nil {
					return nil, fmt.Errorf("invalid quoted value at pos %d", j+1)
				}
				val, j = v, k+1
			} else {
				k := j
				for k < len(s) && s[k] != ' ' {
					k++
				}
				val, j = s[j:k], k
			}
		}
		if _, dup := out[key]; dup {
			return nil, fmt.Errorf("tag %s has been set twice", key)
		}
		out[key] = val
		i = j
		if strings.HasPrefix(s[i:], "\"") {
			return nil, fmt.Errorf("unexpected '\"' at pos %d", i+1)
		}
	}
}
