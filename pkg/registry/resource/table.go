package resource

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apiserver/pkg/registry/rest"
)

// Column is one column of `kubectl get` output.
type Column struct {
	Name        string
	Type        string // "string", "integer", "boolean", "date", ...
	Format      string // "name" for the first column
	Description string
	// Priority 0 columns are always shown; higher ones only with -o wide.
	Priority int32
	// Cell returns the column's value for one (internal) object.
	Cell func(obj runtime.Object) any
}

// NameColumn is the NAME column every table starts with.
var NameColumn = Column{Name: "Name", Type: "string", Format: "name", Description: "Name of the object",
	Cell: func(obj runtime.Object) any {
		m, err := meta.Accessor(obj)
		if err != nil {
			return ""
		}
		return m.GetName()
	}}

// AgeColumn is the AGE column: time since creation.
var AgeColumn = Column{Name: "Age", Type: "date", Description: "Time since the object was created",
	Cell: func(obj runtime.Object) any {
		m, err := meta.Accessor(obj)
		if err != nil {
			return "<unknown>"
		}
		return Since(m.GetCreationTimestamp())
	}}

// Since renders a timestamp the way kubectl renders ages ("5m", "<none>").
func Since(t metav1.Time) string {
	if t.IsZero() {
		return "<none>"
	}
	return duration.HumanDuration(time.Since(t.Time))
}

// SinceP is Since for an optional timestamp.
func SinceP(t *metav1.Time) string {
	if t == nil {
		return "<none>"
	}
	return Since(*t)
}

// TableConvertor renders objects as a metav1.Table with fixed columns.
type TableConvertor struct {
	columns []Column
	defs    []metav1.TableColumnDefinition
}

var _ rest.TableConvertor = &TableConvertor{}

// NewTableConvertor returns a convertor with the given columns after NAME.
func NewTableConvertor(columns ...Column) *TableConvertor {
	all := append([]Column{NameColumn}, columns...)
	defs := make([]metav1.TableColumnDefinition, len(all))
	for i, c := range all {
		defs[i] = metav1.TableColumnDefinition{Name: c.Name, Type: c.Type, Format: c.Format, Description: c.Description, Priority: c.Priority}
	}
	return &TableConvertor{columns: all, defs: defs}
}

// ConvertToTable renders one object or a list.
func (t *TableConvertor) ConvertToTable(_ context.Context, obj runtime.Object, tableOptions runtime.Object) (*metav1.Table, error) {
	table := &metav1.Table{}
	if opts, ok := tableOptions.(*metav1.TableOptions); !ok || !opts.NoHeaders {
		table.ColumnDefinitions = t.defs
	}
	row := func(o runtime.Object) error {
		cells := make([]any, len(t.columns))
		for i, c := range t.columns {
			cells[i] = c.Cell(o)
		}
		table.Rows = append(table.Rows, metav1.TableRow{Cells: cells, Object: runtime.RawExtension{Object: o}})
		return nil
	}
	if meta.IsListType(obj) {
		if err := meta.EachListItem(obj, row); err != nil {
			return nil, fmt.Errorf("rendering table rows: %w", err)
		}
		if l, err := meta.ListAccessor(obj); err == nil {
			table.ResourceVersion = l.GetResourceVersion()
			table.Continue = l.GetContinue()
			table.RemainingItemCount = l.GetRemainingItemCount()
		}
		return table, nil
	}
	if m, err := meta.Accessor(obj); err == nil {
		table.ResourceVersion = m.GetResourceVersion()
	}
	if err := row(obj); err != nil {
		return nil, err
	}
	return table, nil
}

// Until renders the time left until t ("29d", "<none>", "expired").
func Until(t *metav1.Time) string {
	if t == nil || t.IsZero() {
		return "<none>"
	}
	d := time.Until(t.Time)
	if d <= 0 {
		return "expired"
	}
	return duration.HumanDuration(d)
}

// Selector renders a label selector like kubectl ("<none>" when empty).
func Selector(s *metav1.LabelSelector) string {
	if s == nil {
		return "<none>"
	}
	str := metav1.FormatLabelSelector(s)
	if str == "" {
		return "<none>"
	}
	return str
}
