// Package listing writes lists of names for messages and tables that stay
// short however long the list: the first few, then "and N more". It is a
// leaf: it imports only the standard library.
package listing

import (
	"fmt"
	"strings"
)

// Most is how many names a list shows before "and N more".
const Most = 10

// Some joins the first Most names with ", " and says how many more there
// are: "a, b, c", or "a, ..., j and 5 more".
func Some(names []string) string {
	if len(names) <= Most {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:Most], ", "), len(names)-Most)
}
