package ui

// Row is one name/value pair of a detail panel; Pre keeps its value's
// line breaks (a JSON payload, a response excerpt).
type Row struct {
	Name, Value string
	Pre         bool
}

// Detail is a detail panel: a heading (ID names it for assistive
// technology) over rows.
type Detail struct {
	ID, Heading string
	Rows        []Row
}
