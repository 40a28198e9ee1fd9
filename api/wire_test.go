package api_test

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/agentfs/agentfs/api"
)

// The wire schema is written three times: openapi.yaml, the Go types of
// package api (which the server renders and the Go client decodes) and the
// Python SDK's models. TestWireTypes holds them to each other: every
// property of every schema in components/schemas has its field in the Go
// struct (by its json name) and in the Python class (by its name), of the
// same type, with the same nullability, and neither has a field the schema
// lacks.
//
// The rules, for a property of a schema:
//
//	openapi.yaml                  Go (api/)                      Python (sdk/python)
//	string                        string                         str
//	string, format date-time      time.Time                      Optional[datetime] (always: a
//	                                                             time that does not parse reads
//	                                                             as None, never an exception)
//	integer (format int64, int32) int64, int32; int without one  int
//	number                        float64                        float
//	boolean                       bool                           bool
//	array of X                    []X                            list[X]
//	$ref (or allOf of one) S      the type wire maps S to        the class wire maps S to
//	object with its properties    a struct, checked the same way a class, checked the same way
//	any JSON value (no type)      json.RawMessage                Any (None included)
//	required, not nullable        no pointer, no omitempty       not Optional
//	required, nullable            a pointer (or slice, map)      Optional
//	not required                  omitempty                      Optional
//
// Go fields tagged json:"-" and Python fields named _… are not members of
// the document. A difference made on purpose is listed in allowed, with
// its reason; an entry there that no longer matches a difference fails
// the test too.

// wire maps each schema of components/schemas to its Go type and its
// Python classes ("Page[File]" checks the generic class Page with T =
// File), or says why it has none.
var wire = []mapping{
	{schema: "File", goType: reflect.TypeFor[api.File](), py: []string{"File"}},
	{schema: "FileList", goType: reflect.TypeFor[api.FileList](), py: []string{"Page[File]", "AsyncPage[File]"}},
	{schema: "FileFieldsList", why: "a FileList with fields=: the Go client and the Python SDK decode it as FileList, the members left out reading as zero"},
	{schema: "Upload", goType: reflect.TypeFor[api.Upload](), py: []string{"Upload"}},
	{schema: "UploadPart", goType: reflect.TypeFor[api.UploadPart](), py: []string{"UploadPart"}},
	{schema: "UploadList", goType: reflect.TypeFor[api.UploadList](), py: []string{"Page[Upload]", "AsyncPage[Upload]"}},
	{schema: "Batch", goType: reflect.TypeFor[api.Batch](), py: []string{"Batch"}},
	{schema: "BatchItem", goType: reflect.TypeFor[api.BatchItem](), py: []string{"BatchItem"}},
	{schema: "BatchList", goType: reflect.TypeFor[api.BatchList](), py: []string{"Page[Batch]", "AsyncPage[Batch]"}},
	{schema: "Operation", goType: reflect.TypeFor[api.Operation](), py: []string{"Operation"}},
	{schema: "FileVersion", goType: reflect.TypeFor[api.FileVersion](), py: []string{"FileVersion"}},
	{schema: "VersionList", goType: reflect.TypeFor[api.VersionList](), py: []string{"Page[FileVersion]", "AsyncPage[FileVersion]"}},
	{schema: "Link", goType: reflect.TypeFor[api.Link](), py: []string{"Link"}},
	{schema: "ChangeSide", goType: reflect.TypeFor[api.ChangeSide](), py: []string{"ChangeSide"}},
	{schema: "Change", goType: reflect.TypeFor[api.Change](), py: []string{"Change"}},
	{schema: "DiffList", goType: reflect.TypeFor[api.DiffList](), why: "Python: diff() answers list[Change]"},
	{schema: "RestorePlan", goType: reflect.TypeFor[api.RestorePlan](), py: []string{"RestorePlan"}},
	{schema: "FileVersionRef", goType: reflect.TypeFor[api.FileVersionRef](), py: []string{"FileVersionRef"}},
	{schema: "Fork", goType: reflect.TypeFor[api.Fork](), py: []string{"Fork"}},
	{schema: "ForkList", goType: reflect.TypeFor[api.ForkList](), py: []string{"Page[Fork]", "AsyncPage[Fork]"}},
	{schema: "MergeSide", goType: reflect.TypeFor[api.MergeSide](), py: []string{"MergeSide"}},
	{schema: "MergeConflict", goType: reflect.TypeFor[api.MergeConflict](), py: []string{"MergeConflict"}},
	{schema: "Merge", goType: reflect.TypeFor[api.Merge](), py: []string{"Merge"}},
	{schema: "Checkpoint", goType: reflect.TypeFor[api.Checkpoint](), py: []string{"Checkpoint"}},
	{schema: "CheckpointList", goType: reflect.TypeFor[api.CheckpointList](), py: []string{"Page[Checkpoint]", "AsyncPage[Checkpoint]"}},
	{schema: "LinkList", goType: reflect.TypeFor[api.LinkList](), why: "Python: links() answers list[Link]"},
	{schema: "Event", goType: reflect.TypeFor[api.Event](), py: []string{"Event"}},
	{schema: "EventList", goType: reflect.TypeFor[api.EventList](), py: []string{"EventPage"}},
	{schema: "Run", goType: reflect.TypeFor[api.Run](), py: []string{"Run"}},
	{schema: "RunList", goType: reflect.TypeFor[api.RunList](), py: []string{"Page[Run]", "AsyncPage[Run]"}},
	{schema: "RunRevertPlan", goType: reflect.TypeFor[api.RunRevertPlan](), py: []string{"RunRevertPlan"}},
	{schema: "RunRevertStep", goType: reflect.TypeFor[api.RunRevertStep](), py: []string{"RunRevertStep"}},
	{schema: "RunRecovery", goType: reflect.TypeFor[api.RunRecovery](), py: []string{"RunRecovery"}},
	{schema: "RecoveryConfirmed", goType: reflect.TypeFor[api.RecoveryConfirmed](), py: []string{"RecoveryConfirmed"}},
	{schema: "RecoveryOperation", goType: reflect.TypeFor[api.RecoveryOp](), py: []string{"RecoveryOperation"}},
	{schema: "RecoveryInFlight", goType: reflect.TypeFor[api.RecoveryInFlight](), py: []string{"RecoveryInFlight"}},
	{schema: "RecoveryUpload", goType: reflect.TypeFor[api.RecoveryUpload](), py: []string{"RecoveryUpload"}},
	{schema: "RecoveryBatch", goType: reflect.TypeFor[api.RecoveryBatch](), py: []string{"RecoveryBatch"}},
	{schema: "Next", goType: reflect.TypeFor[api.Next](), py: []string{"Next"}},
	{schema: "SearchResults", goType: reflect.TypeFor[api.SearchResults](), py: []string{"SearchResults", "AsyncSearchResults"}},
	{schema: "SearchMatch", goType: reflect.TypeFor[api.SearchMatch](), py: []string{"SearchMatch"}},
	{schema: "Protocol", goType: reflect.TypeFor[api.Protocol](), py: []string{"Protocol"}},
	{schema: "Problem", goType: reflect.TypeFor[api.Problem](), py: []string{"Problem"}},
	{schema: "ProtectedResource", goType: reflect.TypeFor[api.ProtectedResource](), why: "Python: OAuth clients read it; the SDK takes a token, it does not get one"},
	{schema: "ProblemType", goType: reflect.TypeFor[api.ProblemType](), why: "Python: the SDK does not read /problems/{code}"},
	{schema: "Health", goType: reflect.TypeFor[api.Health](), why: "Python: the SDK does not call /healthz or /readyz"},
	{schema: "ProblemCode", why: "a string enum, the type of Problem.code"},
	{schema: "JSONRPCError", why: "the /mcp door's JSON-RPC error, written with the MCP SDK's types"},
	{schema: "CreateUploadRequest", why: requestBody},
	{schema: "CompleteUploadRequest", why: requestBody},
	{schema: "CreateBatchRequest", why: requestBody},
	{schema: "BatchOperation", why: requestBody},
	{schema: "BatchPutOperation", why: requestBody},
	{schema: "BatchDeleteOperation", why: requestBody},
	{schema: "BatchRestoreOperation", why: requestBody},
	{schema: "BatchCopyOperation", why: requestBody},
	{schema: "UpdateFileRequest", why: requestBody},
	{schema: "RevertRequest", why: requestBody},
	{schema: "MoveRequest", why: requestBody},
	{schema: "CreateLinkRequest", why: requestBody},
	{schema: "CreateTokenRequest", why: requestBody},
	{schema: "CreateWebhookRequest", why: requestBody},
	{schema: "UpdateWebhookRequest", why: requestBody},
	{schema: "Webhook", goType: reflect.TypeFor[api.Webhook](), py: []string{"Webhook"}},
	{schema: "WebhookList", goType: reflect.TypeFor[api.WebhookList](), why: "Python: webhooks() answers list[Webhook]"},
	{schema: "WebhookDelivery", goType: reflect.TypeFor[api.WebhookDelivery](), py: []string{"WebhookDelivery"}},
	{schema: "WebhookDeliveryList", goType: reflect.TypeFor[api.WebhookDeliveryList](), why: "Python: webhook_deliveries() answers list[WebhookDelivery]"},
	{schema: "Token", goType: reflect.TypeFor[api.Token](), py: []string{"Token"}},
	{schema: "TokenList", goType: reflect.TypeFor[api.TokenList](), why: "Python: tokens() answers list[Token]"},
}

const requestBody = "a request body: handlers decode it (keeping which members were sent), the clients send it from their arguments"

// notWire are the Python dataclasses that answer no schema.
var notWire = map[string]string{
	"BatchOp": "one operation of a POST /v1/batch request, " + requestBody,
	"Folder":  "a FileList answered with delimiter=/, read by list_folder into files and prefixes (the paged lists read theirs into Page)",
}

// allowed are the differences made on purpose, each with its reason; a
// key is a difference's side, place and kind (missing, extra, type or
// null), as the test prints it.
var allowed = []struct {
	keys []string
	why  string
}{
	{
		keys: []string{"py FileList.prefixes (missing)"},
		why:  "prefixes come only with delimiter=/, which list_folder reads into Folder; Page and AsyncPage are the paged lists of every schema",
	},
	{
		keys: []string{"py Change.from (missing)", "py Change.from_ (extra)"},
		why:  "from is a Python keyword: the class reads the member from into the field from_",
	},
	{
		keys: []string{"py Fork.from (missing)", "py Fork.from_ (extra)"},
		why:  "from is a Python keyword: the class reads the member from into the field from_",
	},
	{
		keys: []string{"go UploadPart.object (null)", "go UploadPart.upload_id (null)", "py UploadPart.upload_id (null)",
			"go Upload.parts[].object (extra)", "go Upload.parts[].upload_id (extra)",
			"py Upload.parts[].object (extra)", "py Upload.parts[].upload_id (extra)"},
		why: "one type for a part in each language: PUT /v1/uploads/{id}/parts/{n} answers it with object and upload_id, an Upload's parts list it without (omitted when empty)",
	},
	{
		keys: []string{"py Protocol.idempotency (type)", "py Protocol.retry (type)", "py Protocol.limits (type)", "py Protocol.mcp (type)",
			"py Protocol.oauth (type)", "py Protocol.grants (type)", "py Protocol.raw (extra)"},
		why: "the Python Protocol keeps each member as the dict the server sent (code reads them by name, limits grows with the server) and the whole document as raw",
	},
	{
		keys: []string{"py Batch.items (null)"},
		why:  "absent in a listing (GET /v1/batch), read as an empty list",
	},
	{
		keys: []string{"py Problem.type (null)", "py Problem.code (null)", "py Problem.request_id (null)",
			"py Problem.retry_after (extra)", "py Problem.body (extra)"},
		why: "the Python Problem is also made from an error answer that is no problem document (a proxy's page), which has no type, code or request_id; " +
			"it carries the answer's Retry-After and its body besides",
	},
}

func TestWireTypes(t *testing.T) {
	w := newWireCheck(t)
	for _, m := range wire {
		ref := w.spec.Components.Schemas[m.schema]
		if ref == nil {
			t.Errorf("wire maps %s, which openapi.yaml's components/schemas lacks", m.schema)
			continue
		}
		if m.goType == nil && m.py == nil && m.why == "" {
			t.Errorf("wire: %s has neither a Go type nor a Python class, and no reason why", m.schema)
		}
		if m.goType != nil {
			w.goStruct(m.schema, ref.Value, m.goType)
		}
		for _, py := range m.py {
			class := parsePy(py)
			w.pyClass(m.schema, ref.Value, class.name, class.args)
		}
	}
	for name := range w.spec.Components.Schemas {
		if !slices.ContainsFunc(wire, func(m mapping) bool { return m.schema == name }) {
			t.Errorf("openapi.yaml has schema %s, which wire does not map: add it there with its Go type and Python class", name)
		}
	}
	w.reachedEverything()
	w.report()
}

// mapping is a schema's Go type and Python classes, or why it has none.
type mapping struct {
	schema string
	goType reflect.Type
	py     []string
	why    string
}

// wireCheck walks the schemas and collects what differs.
type wireCheck struct {
	t        *testing.T
	spec     *openapi3.T
	py       map[string]pyClassDump
	goOf     map[string]reflect.Type // schema name -> Go type
	pyOf     map[string]string       // schema name -> Python class
	findings map[string][]string     // side and place -> what differs
	goSeen   map[string]bool
	pySeen   map[string]bool
}

func newWireCheck(t *testing.T) *wireCheck {
	spec, err := openapi3.NewLoader().LoadFromFile(filepath.Join("..", "openapi.yaml"))
	if err != nil {
		t.Fatalf("read openapi.yaml: %v", err)
	}
	w := &wireCheck{t: t, spec: spec, py: pythonModels(t), goOf: map[string]reflect.Type{}, pyOf: map[string]string{},
		findings: map[string][]string{}, goSeen: map[string]bool{}, pySeen: map[string]bool{}}
	for _, m := range wire {
		if m.goType != nil {
			w.goOf[m.schema] = m.goType
		}
		if len(m.py) > 0 {
			w.pyOf[m.schema] = parsePy(m.py[0]).name
		}
	}
	return w
}

// find notes a difference: what is missing (a field the schema has),
// extra (a field it lacks), type or null (Optional, pointer, omitempty).
func (w *wireCheck) find(side, place, what, format string, args ...any) {
	key := side + " " + place + " (" + what + ")"
	w.findings[key] = append(w.findings[key], fmt.Sprintf(format, args...))
}

// report fails the test with every difference not allowed, and every
// allowance that no longer matches one.
func (w *wireCheck) report() {
	w.t.Helper()
	used := map[string]bool{}
	for _, a := range allowed {
		for _, k := range a.keys {
			if _, ok := w.findings[k]; ok {
				used[k] = true
				delete(w.findings, k)
			}
		}
	}
	var lines []string
	for k, msgs := range w.findings {
		for _, m := range msgs {
			lines = append(lines, k+": "+m)
		}
	}
	for _, a := range allowed {
		for _, k := range a.keys {
			if !used[k] {
				lines = append(lines, k+": allowed (\""+a.why+"\") but matches no difference any more: remove it from allowed")
			}
		}
	}
	if len(lines) > 0 {
		slices.Sort(lines)
		w.t.Errorf("openapi.yaml, api/ (Go) and sdk/python (Python) disagree; fix whichever is wrong (DESIGN §4 is the contract), "+
			"or add a difference made on purpose to allowed in api/wire_test.go with its reason:\n\t%s", strings.Join(lines, "\n\t"))
	}
}

// prop is a property as the rules read it: its schema (allOf of one
// unwrapped), the schema it names if any, and whether it may be null.
type prop struct {
	s        *openapi3.Schema
	named    string // the components/schemas name of an object it refers to
	nullable bool
}

func propOf(ref *openapi3.SchemaRef) prop {
	p := prop{s: ref.Value, nullable: ref.Value.Nullable}
	if ref.Ref == "" && len(ref.Value.AllOf) == 1 && ref.Value.Type.IsEmpty() {
		ref = ref.Value.AllOf[0]
		p.s = ref.Value
	}
	if name, ok := strings.CutPrefix(ref.Ref, "#/components/schemas/"); ok && ref.Value.Type.Is("object") {
		p.named = name
	}
	return p
}

// kind names a schema's type as the rules do: string, date-time,
// integer, int64, int32, number, boolean, array, object or any.
func kind(s *openapi3.Schema) string {
	switch {
	case s.Type.Is("string") && s.Format == "date-time":
		return "date-time"
	case s.Type.Is("integer") && (s.Format == "int64" || s.Format == "int32"):
		return s.Format
	case s.Type.IsEmpty():
		return "any"
	case s.Type.IsSingle():
		return s.Type.Slice()[0]
	}
	return strings.Join(s.Type.Slice(), "|")
}

func sortedProps(s *openapi3.Schema) []string {
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// goStruct checks the struct t against the object schema s at place.
func (w *wireCheck) goStruct(place string, s *openapi3.Schema, t reflect.Type) {
	if t.Kind() != reflect.Struct {
		w.find("go", place, "type", "openapi.yaml says an object, %s is %s", place, t)
		return
	}
	w.goSeen[t.Name()] = true
	fields := map[string]reflect.StructField{}
	for _, f := range reflect.VisibleFields(t) {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		fields[name] = f
		if s.Properties[name] == nil {
			w.find("go", place+"."+name, "extra", "%s.%s is not in openapi.yaml", t.Name(), f.Name)
		}
	}
	for _, name := range sortedProps(s) {
		f, ok := fields[name]
		if !ok {
			w.find("go", place+"."+name, "missing", "%s has no field for it (json:%q)", t.Name(), name)
			continue
		}
		w.goField(place+"."+name, s.Properties[name], slices.Contains(s.Required, name), f)
	}
}

var (
	rawMessage = reflect.TypeFor[json.RawMessage]()
	timeType   = reflect.TypeFor[time.Time]()
)

// goField checks one field's presence rules, then its type.
func (w *wireCheck) goField(place string, ref *openapi3.SchemaRef, required bool, f reflect.StructField) {
	p := propOf(ref)
	omit := strings.Contains(f.Tag.Get("json"), ",omitempty")
	switch {
	case required && omit:
		w.find("go", place, "null", "required by openapi.yaml, so %s is not omitempty", f.Name)
	case !required && !omit:
		w.find("go", place, "null", "not required by openapi.yaml, so %s is omitempty", f.Name)
	}
	t := f.Type
	nilable := t.Kind() == reflect.Slice || t.Kind() == reflect.Map
	switch {
	case t.Kind() == reflect.Pointer && (p.nullable || !required):
		t = t.Elem()
	case t.Kind() == reflect.Pointer:
		w.find("go", place, "null", "openapi.yaml says it is never null, so %s is no pointer (%s)", f.Name, t)
		t = t.Elem()
	case p.nullable && !nilable:
		w.find("go", place, "null", "openapi.yaml says it may be null, so %s is a pointer, not %s", f.Name, t)
	}
	w.goType(place, p, t)
}

// goType checks that t is the Go type of p's schema.
func (w *wireCheck) goType(place string, p prop, t reflect.Type) {
	want := map[string]reflect.Type{
		"string": reflect.TypeFor[string](), "date-time": timeType, "integer": reflect.TypeFor[int](),
		"int64": reflect.TypeFor[int64](), "int32": reflect.TypeFor[int32](), "number": reflect.TypeFor[float64](),
		"boolean": reflect.TypeFor[bool](), "any": rawMessage,
	}
	k := kind(p.s)
	switch {
	case want[k] != nil:
		if t != want[k] {
			w.find("go", place, "type", "openapi.yaml says %s, so %s, not %s", k, want[k], t)
		}
	case k == "array":
		if t.Kind() != reflect.Slice || t == rawMessage {
			w.find("go", place, "type", "openapi.yaml says an array, not %s", t)
			return
		}
		w.goType(place+"[]", propOf(p.s.Items), t.Elem())
	case k == "object" && p.named != "":
		if w.goOf[p.named] != t {
			w.find("go", place, "type", "openapi.yaml says %s, so %v, not %s", p.named, w.goOf[p.named], t)
		}
	case k == "object":
		w.goStruct(place, p.s, t)
	default:
		w.find("go", place, "type", "openapi.yaml says %s, which the rules do not map", k)
	}
}

// pyClassDump is a Python class as testdata/pymodels.py prints it.
type pyClassDump struct {
	Module    string   `json:"module"`
	Dataclass bool     `json:"dataclass"`
	Params    []string `json:"params"`
	Fields    []struct {
		Name string `json:"name"`
		Type string `json:"type"`
	} `json:"fields"`
}

// pythonModels reads the SDK's models with Debian's python3 (or the one
// on PATH): its ast module parses them, nothing is imported.
func pythonModels(t *testing.T) map[string]pyClassDump {
	python := "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		if python, err = exec.LookPath("python3"); err != nil {
			t.Fatalf("the wire test reads the Python SDK's models with python3, which is not installed: run make deps (Debian's python3)")
		}
	}
	dir := filepath.Join("..", "sdk", "python", "src", "agentfs")
	out, err := exec.Command(python, filepath.Join("testdata", "pymodels.py"),
		filepath.Join(dir, "_models.py"), filepath.Join(dir, "_errors.py")).Output()
	if err != nil {
		t.Fatalf("read the Python models with %s: %v\n%s", python, err, stderrOf(err))
	}
	var classes map[string]pyClassDump
	if err := json.Unmarshal(out, &classes); err != nil {
		t.Fatalf("testdata/pymodels.py printed no JSON: %v", err)
	}
	return classes
}

func stderrOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}

// pyType is a parsed Python annotation: Optional[list[File]] is
// Optional with one argument, list with one argument, File.
type pyType struct {
	name string
	args []pyType
}

func (p pyType) String() string {
	if len(p.args) == 0 {
		return p.name
	}
	args := make([]string, len(p.args))
	for i, a := range p.args {
		args[i] = a.String()
	}
	return p.name + "[" + strings.Join(args, ", ") + "]"
}

func parsePy(s string) pyType {
	t, _ := parsePyAt(strings.ReplaceAll(s, " ", ""), 0)
	return t
}

func parsePyAt(s string, i int) (pyType, int) {
	start := i
	for i < len(s) && !strings.ContainsRune("[],", rune(s[i])) {
		i++
	}
	t := pyType{name: strings.Trim(s[start:i], `'"`)}
	if i < len(s) && s[i] == '[' {
		for i < len(s) && s[i] != ']' {
			var arg pyType
			arg, i = parsePyAt(s, i+1)
			t.args = append(t.args, arg)
		}
		i++ // the closing ]
	}
	return t, i
}

// pyClass checks the Python class name (with its type parameters bound to
// args) against the object schema s at place.
func (w *wireCheck) pyClass(place string, s *openapi3.Schema, name string, args []pyType) {
	c, ok := w.py[name]
	if !ok || len(c.Fields) == 0 {
		w.find("py", place, "missing", "no Python class %s with fields in _models.py or _errors.py", name)
		return
	}
	w.pySeen[name] = true
	bind := map[string]pyType{}
	for i, param := range c.Params {
		if i < len(args) {
			bind[param] = args[i]
		}
	}
	fields := map[string]pyType{}
	for _, f := range c.Fields {
		if strings.HasPrefix(f.Name, "_") {
			continue
		}
		fields[f.Name] = substitute(parsePy(f.Type), bind)
		if s.Properties[f.Name] == nil {
			w.find("py", place+"."+f.Name, "extra", "%s.%s is not in openapi.yaml", name, f.Name)
		}
	}
	for _, prop := range sortedProps(s) {
		t, ok := fields[prop]
		if !ok {
			w.find("py", place+"."+prop, "missing", "%s has no field %s", name, prop)
			continue
		}
		w.pyField(place+"."+prop, s.Properties[prop], slices.Contains(s.Required, prop), name, t)
	}
}

func substitute(t pyType, bind map[string]pyType) pyType {
	if b, ok := bind[t.name]; ok && len(t.args) == 0 {
		return b
	}
	out := pyType{name: t.name}
	for _, a := range t.args {
		out.args = append(out.args, substitute(a, bind))
	}
	return out
}

// pyField checks one field's Optional, then its type.
func (w *wireCheck) pyField(place string, ref *openapi3.SchemaRef, required bool, class string, t pyType) {
	p := propOf(ref)
	optional := t.name == "Optional" && len(t.args) == 1
	if optional {
		t = t.args[0]
	}
	wantOptional := kind(p.s) == "date-time" || kind(p.s) != "any" && (p.nullable || !required)
	switch {
	case wantOptional && !optional:
		w.find("py", place, "null", "openapi.yaml says it may be null or absent (or it is a time), so Optional, not %s", t)
	case !wantOptional && optional:
		w.find("py", place, "null", "openapi.yaml says it is always there and never null, so not Optional[%s]", t)
	}
	w.pyType(place, p, t)
}

// pyType checks that t is the Python type of p's schema.
func (w *wireCheck) pyType(place string, p prop, t pyType) {
	want := map[string]string{"string": "str", "date-time": "datetime", "integer": "int", "int64": "int", "int32": "int",
		"number": "float", "boolean": "bool", "any": "Any"}
	k := kind(p.s)
	switch {
	case want[k] != "":
		if t.String() != want[k] {
			w.find("py", place, "type", "openapi.yaml says %s, so %s, not %s", k, want[k], t)
		}
	case k == "array":
		if t.name != "list" || len(t.args) != 1 {
			w.find("py", place, "type", "openapi.yaml says an array, so list[...], not %s", t)
			return
		}
		w.pyType(place+"[]", propOf(p.s.Items), t.args[0])
	case k == "object" && p.named != "":
		if w.pyOf[p.named] != t.String() {
			w.find("py", place, "type", "openapi.yaml says %s, so %s, not %s", p.named, w.pyOf[p.named], t)
		}
	case k == "object" && w.py[t.name].Dataclass:
		w.pyClass(place, p.s, t.name, t.args)
	case k == "object":
		w.find("py", place, "type", "openapi.yaml says an object with members, so a dataclass, not %s", t)
	default:
		w.find("py", place, "type", "openapi.yaml says %s, which the rules do not map", k)
	}
}

// reachedEverything fails for a Go struct of package api, or a Python
// dataclass, that no schema reached: a type the spec does not describe.
func (w *wireCheck) reachedEverything() {
	files, err := filepath.Glob("*.go")
	if err != nil {
		w.t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			w.t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if ts, ok := n.(*ast.TypeSpec); ok {
				if _, isStruct := ts.Type.(*ast.StructType); isStruct && ts.Name.IsExported() && !w.goSeen[ts.Name.Name] {
					w.find("go", ts.Name.Name, "extra", "api.%s answers no schema of openapi.yaml: map it in wire", ts.Name.Name)
				}
			}
			return true
		})
	}
	for name, c := range w.py {
		if c.Dataclass && !w.pySeen[name] && notWire[name] == "" {
			w.find("py", name, "extra", "the dataclass %s answers no schema of openapi.yaml: map it in wire, or say why in notWire", name)
		}
	}
}
