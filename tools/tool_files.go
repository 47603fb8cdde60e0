package tools

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
)

const (
	// binarySniffBytes: a file with a NUL byte in its first bytes is binary.
	binarySniffBytes = 8000
	// maxReadLines caps the max_lines argument of read_file.
	maxReadLines = 100000
	// countLinesLimit: read_file stops counting a file's lines past this
	// many bytes and reports the total as unknown.
	countLinesLimit = 64 << 20
	// redactWholeLimit: read_file redacts files up to this size as a whole.
	redactWholeLimit = 16 << 20
)

// relSlash returns rel with forward slashes, as results show paths.
func relSlash(rel string) string { return filepath.ToSlash(rel) }

// describeFSError explains a file system error without the absolute path.
func describeFSError(path string, err error) string {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Sprintf("%s: no such file or directory", path)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Sprintf("%s: permission denied", path)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Sprintf("%s: %v", path, pe.Err)
	}
	return fmt.Sprintf("%s: %v", path, err)
}

// resolveArg resolves a path argument. A refusal is returned as the error; an
// I/O problem as a failed Result (ok == false).
func (e *Executor) resolveArg(field, p string) (rel string, res Result, ok bool, err error) {
	rel, _, err = e.root.resolve(field, p)
	if err != nil {
		if IsRefusal(err) {
			return "", Result{}, false, err
		}
		return "", failed("%s", describeFSError(p, err)), false, nil
	}
	return rel, Result{}, true, nil
}

// inGitDir reports whether rel lies inside a .git directory, which the
// write tools leave to git.
func inGitDir(rel string) bool {
	return slices.Contains(strings.Split(filepath.ToSlash(rel), "/"), ".git")
}

type readArgs struct {
	Path      string `json:"path"`
	StartLine *int   `json:"start_line"`
	MaxLines  *int   `json:"max_lines"`
}

type readData struct {
	Path          string `json:"path"`
	Size          int64  `json:"size"`
	StartLine     int    `json:"start_line"`
	EndLine       int    `json:"end_line"`
	TotalLines    int    `json:"total_lines,omitempty"`
	Truncated     bool   `json:"truncated,omitempty"`
	NextStartLine int    `json:"next_start_line,omitempty"`
	// Stubbed: a sensitive file (SensitiveFile), shown as SensitiveStub.
	Stubbed bool `json:"stubbed,omitempty"`
}

func (e *Executor) readFileTool() builtin {
	return builtin{
		name:     ToolReadFile,
		readOnly: true,
		desc: fmt.Sprintf("Read a text file in the work directory. Returns its lines exactly (at most %d lines or %s per call); "+
			"use start_line to read further.", e.opts.Files.ReadLines, sizeString(int64(e.opts.Files.MaxReadBytes))),
		schema: func() schema {
			return object(schema{
				"path":       nonEmptyStr("File path, relative to the work directory."),
				"start_line": integer("First line to return, counting from 1. Default 1.", 1, math32),
				"max_lines":  integer(fmt.Sprintf("Most lines to return. Default %d.", e.opts.Files.ReadLines), 1, maxReadLines),
			}, "path")
		},
		run: func(ctx context.Context, e *Executor, _ string, raw json.RawMessage) (Result, error) {
			var a readArgs
			if err := decodeArgs(ToolReadFile, e.tools[ToolReadFile].fields, raw, &a); err != nil {
				return Result{}, err
			}
			return e.readFile(a)
		},
	}
}

// math32 is the largest int accepted for line numbers.
const math32 = 1<<31 - 1

func (e *Executor) readFile(a readArgs) (Result, error) {
	if a.Path == "" {
		return Result{}, fmt.Errorf("%w: read_file: path is required", ErrInvalidArgs)
	}
	start, err := optInt(ToolReadFile, "start_line", a.StartLine, 1, 1, math32)
	if err != nil {
		return Result{}, err
	}
	limit, err := optInt(ToolReadFile, "max_lines", a.MaxLines, e.opts.Files.ReadLines, 1, maxReadLines)
	if err != nil {
		return Result{}, err
	}
	rel, res, ok, err := e.resolveArg("path", a.Path)
	if !ok {
		return res, err
	}
	root, err := e.root.open()
	if err != nil {
		return failed("read_file: %v", err), nil
	}
	defer root.Close()
	f, err := root.Open(rel)
	if err != nil {
		return failed("read_file: %s", describeFSError(a.Path, err)), nil
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return failed("read_file: %s", describeFSError(a.Path, err)), nil
	}
	if fi.IsDir() {
		return failed("read_file: %s is a directory; use list to see its entries", a.Path), nil
	}
	if rule, ok := SensitiveFile(relSlash(rel)); ok {
		return Result{OK: true, Output: SensitiveStub(relSlash(rel), rule), Summary: fmt.Sprintf("%s: a sensitive file (%s), its content is not shown", relSlash(rel), rule),
			Data: dataOf(readData{Path: relSlash(rel), Size: fi.Size(), Stubbed: true})}, nil
	}
	br := bufio.NewReaderSize(f, 64<<10)
	if head, _ := br.Peek(binarySniffBytes); bytes.IndexByte(head, 0) >= 0 {
		return failed("read_file: %s is a binary file (%s); it is not shown", a.Path, sizeString(fi.Size())), nil
	}
	if fi.Size() <= redactWholeLimit {
		// Redact the whole file before cutting the window, so a secret that
		// spans lines (a PEM key) is recognised even when the window holds
		// only part of it. Redaction keeps line numbers.
		all, err := io.ReadAll(br)
		if err != nil {
			return failed("read_file: %s", describeFSError(a.Path, err)), nil
		}
		br = bufio.NewReaderSize(strings.NewReader(e.red.Redact(string(all))), 64<<10)
	}

	var out bytes.Buffer
	budget := e.opts.Files.MaxReadBytes
	d := readData{Path: relSlash(rel), Size: fi.Size(), StartLine: start}
	var line []byte
	lineNo, scanned, collecting := 0, int64(0), true
	for {
		var n int
		line, n, err = readLine(br, line[:0], budget+1)
		if n == 0 {
			break
		}
		lineNo++
		scanned += int64(n)
		if lineNo >= start && collecting {
			switch {
			case lineNo >= start+limit:
				collecting = false
			case out.Len()+n > budget:
				collecting, d.Truncated = false, true
				if out.Len() == 0 { // one line longer than the whole budget
					k := budget
					if j := lastDelim(line[:k], 256); j > 0 {
						k = j
					}
					out.Write(line[:k])
					d.EndLine = lineNo
				}
			default:
				out.Write(line)
				d.EndLine = lineNo
			}
		}
		if !collecting && scanned > countLinesLimit {
			lineNo = -1
			break
		}
		if err != nil {
			break
		}
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return failed("read_file: %s", describeFSError(a.Path, err)), nil
	}
	if lineNo >= 0 {
		d.TotalLines = lineNo
	}
	if lineNo >= 0 && start > lineNo && !(start == 1 && lineNo == 0) {
		return failed("read_file: start_line %d is past the end of %s (%d lines)", start, a.Path, lineNo), nil
	}
	if d.EndLine > 0 && (lineNo < 0 || d.EndLine < lineNo) {
		d.NextStartLine = d.EndLine + 1
		d.Truncated = true
	}
	r := Result{OK: true, Output: strings.ToValidUTF8(out.String(), "\uFFFD"), Truncated: d.Truncated, Data: dataOf(d)}
	total := "?"
	if d.TotalLines > 0 || lineNo == 0 {
		total = fmt.Sprint(d.TotalLines)
	}
	switch {
	case lineNo == 0:
		r.Summary = fmt.Sprintf("read_file %s: empty file", d.Path)
	default:
		r.Summary = fmt.Sprintf("read_file %s: lines %d-%d of %s (%s)", d.Path, start, d.EndLine, total, sizeString(fi.Size()))
	}
	if d.NextStartLine > 0 {
		r.Summary += fmt.Sprintf("; more follows, continue with start_line %d", d.NextStartLine)
	}
	return r, nil
}

// readLine reads one line (with its '\n') into buf, keeping at most keep
// bytes, and returns the kept bytes and the line's full length. At the end
// of input it returns n == 0 and the reader's error.
func readLine(br *bufio.Reader, buf []byte, keep int) ([]byte, int, error) {
	n := 0
	for {
		chunk, err := br.ReadSlice('\n')
		n += len(chunk)
		if room := keep - len(buf); room > 0 {
			buf = append(buf, chunk[:min(len(chunk), room)]...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return buf, n, err
	}
}

type writeArgs struct {
	Path       string  `json:"path"`
	Content    *string `json:"content"`
	CreateDirs *bool   `json:"create_dirs"`
}

func (e *Executor) writeFileTool() builtin {
	return builtin{
		name: ToolWriteFile,
		desc: "Create or replace a file in the work directory with the given content, atomically (readers see the old file or the new one, never a mix). " +
			"Parent directories are created. Use edit_file to change part of a file.",
		schema: func() schema {
			return object(schema{
				"path":        nonEmptyStr("File path, relative to the work directory."),
				"content":     str("The complete new content of the file."),
				"create_dirs": boolean("Create missing parent directories. Default true."),
			}, "path", "content")
		},
		run: func(ctx context.Context, e *Executor, _ string, raw json.RawMessage) (Result, error) {
			var a writeArgs
			if err := decodeArgs(ToolWriteFile, e.tools[ToolWriteFile].fields, raw, &a); err != nil {
				return Result{}, err
			}
			return e.writeFile(a)
		},
	}
}

type writeData struct {
	Path    string `json:"path"`
	Bytes   int    `json:"bytes"`
	Created bool   `json:"created"`
	// SHA256 is the hex SHA-256 of what was written, for the audit.
	SHA256 string `json:"sha256"`
}

// sha256Hex is the hex SHA-256 of b.
func sha256Hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func (e *Executor) writeFile(a writeArgs) (Result, error) {
	switch {
	case a.Path == "":
		return Result{}, fmt.Errorf("%w: write_file: path is required", ErrInvalidArgs)
	case a.Content == nil:
		return Result{}, fmt.Errorf(`%w: write_file: content is required (use "" for an empty file)`, ErrInvalidArgs)
	case len(*a.Content) > e.opts.Files.MaxWriteBytes:
		return Result{}, fmt.Errorf("%w: write_file: content is %s, over the %s limit", ErrInvalidArgs, sizeString(int64(len(*a.Content))), sizeString(int64(e.opts.Files.MaxWriteBytes)))
	}
	rel, res, ok, err := e.resolveArg("path", a.Path)
	if !ok {
		return res, err
	}
	if inGitDir(rel) {
		return Result{}, fmt.Errorf("%w: write_file: %q is inside .git; use the git tools", ErrInvalidArgs, a.Path)
	}
	if rel == "." {
		return failed("write_file: %s is the work directory itself", a.Path), nil
	}
	root, err := e.root.open()
	if err != nil {
		return failed("write_file: %v", err), nil
	}
	defer root.Close()
	mkdirs := a.CreateDirs == nil || *a.CreateDirs
	created, err := writeAtomic(root, rel, []byte(*a.Content), mkdirs)
	if err != nil {
		return failed("write_file: %s", describeFSError(a.Path, err)), nil
	}
	d := writeData{Path: relSlash(rel), Bytes: len(*a.Content), Created: created, SHA256: sha256Hex([]byte(*a.Content))}
	verb := "replaced"
	if created {
		verb = "created"
	}
	return Result{OK: true, Data: dataOf(d), Summary: fmt.Sprintf("write_file %s: %s, %s", d.Path, verb, sizeString(int64(d.Bytes)))}, nil
}

type editArgs struct {
	Path       string  `json:"path"`
	OldText    *string `json:"old_text"`
	NewText    *string `json:"new_text"`
	ReplaceAll bool    `json:"replace_all"`
}

type editData struct {
	Path         string `json:"path"`
	Replacements int    `json:"replacements"`
	Line         int    `json:"line"`
	// Bytes and SHA256 are the size and hex SHA-256 of the file as written.
	Bytes  int    `json:"bytes"`
	SHA256 string `json:"sha256"`
}

func (e *Executor) editFileTool() builtin {
	return builtin{
		name: ToolEditFile,
		desc: "Replace exact text in a file. old_text must match the file exactly (whitespace and indentation included) and, " +
			"unless replace_all is set, exactly once; include enough surrounding lines to make it unique. The file is rewritten atomically.",
		schema: func() schema {
			return object(schema{
				"path":        nonEmptyStr("File path, relative to the work directory."),
				"old_text":    nonEmptyStr("The exact text to replace."),
				"new_text":    str("The replacement text (may be empty to delete)."),
				"replace_all": boolean("Replace every occurrence instead of requiring exactly one. Default false."),
			}, "path", "old_text", "new_text")
		},
		run: func(ctx context.Context, e *Executor, _ string, raw json.RawMessage) (Result, error) {
			var a editArgs
			if err := decodeArgs(ToolEditFile, e.tools[ToolEditFile].fields, raw, &a); err != nil {
				return Result{}, err
			}
			return e.editFile(a)
		},
	}
}

func (e *Executor) editFile(a editArgs) (Result, error) {
	switch {
	case a.Path == "":
		return Result{}, fmt.Errorf("%w: edit_file: path is required", ErrInvalidArgs)
	case a.OldText == nil || *a.OldText == "":
		return Result{}, fmt.Errorf("%w: edit_file: old_text is required and must not be empty (to create a file use write_file)", ErrInvalidArgs)
	case a.NewText == nil:
		return Result{}, fmt.Errorf(`%w: edit_file: new_text is required (use "" to delete old_text)`, ErrInvalidArgs)
	case *a.OldText == *a.NewText:
		return Result{}, fmt.Errorf("%w: edit_file: old_text and new_text are the same", ErrInvalidArgs)
	}
	rel, res, ok, err := e.resolveArg("path", a.Path)
	if !ok {
		return res, err
	}
	if inGitDir(rel) {
		return Result{}, fmt.Errorf("%w: edit_file: %q is inside .git; use the git tools", ErrInvalidArgs, a.Path)
	}
	root, err := e.root.open()
	if err != nil {
		return failed("edit_file: %v", err), nil
	}
	defer root.Close()
	fi, err := root.Stat(rel)
	if err != nil {
		return failed("edit_file: %s", describeFSError(a.Path, err)), nil
	}
	if fi.IsDir() {
		return failed("edit_file: %s is a directory", a.Path), nil
	}
	if fi.Size() > int64(e.opts.Files.MaxWriteBytes) {
		return failed("edit_file: %s is %s, over the %s limit", a.Path, sizeString(fi.Size()), sizeString(int64(e.opts.Files.MaxWriteBytes))), nil
	}
	b, err := root.ReadFile(rel)
	if err != nil {
		return failed("edit_file: %s", describeFSError(a.Path, err)), nil
	}
	content, old, repl := string(b), *a.OldText, *a.NewText
	n := strings.Count(content, old)
	switch {
	case n == 0:
		msg := fmt.Sprintf("edit_file: old_text was not found in %s", a.Path)
		if strings.Contains(old, e.red.Replacement()) {
			msg += fmt.Sprintf("; old_text contains %s: the file holds a secret that is hidden from you, so edit the text around it", e.red.Replacement())
		} else if t := strings.TrimSpace(old); t != "" && strings.Contains(content, t) {
			msg += "; it is there when leading and trailing whitespace are ignored: copy the exact text, including indentation and line ends"
		} else {
			msg += "; read the file again and copy the exact text"
		}
		return failed("%s", msg), nil
	case n > 1 && !a.ReplaceAll:
		return failed("edit_file: old_text occurs %d times in %s (lines %s); include more surrounding text to make it unique, or set replace_all",
			n, a.Path, occurrenceLines(content, old, 5)), nil
	}
	line := strings.Count(content[:strings.Index(content, old)], "\n") + 1
	var updated string
	if a.ReplaceAll {
		updated = strings.ReplaceAll(content, old, repl)
	} else {
		updated = strings.Replace(content, old, repl, 1)
	}
	if len(updated) > e.opts.Files.MaxWriteBytes {
		return failed("edit_file: the result would be %s, over the %s limit", sizeString(int64(len(updated))), sizeString(int64(e.opts.Files.MaxWriteBytes))), nil
	}
	if _, err := writeAtomic(root, rel, []byte(updated), false); err != nil {
		return failed("edit_file: %s", describeFSError(a.Path, err)), nil
	}
	d := editData{Path: relSlash(rel), Replacements: n, Line: line, Bytes: len(updated), SHA256: sha256Hex([]byte(updated))}
	return Result{OK: true, Data: dataOf(d), Summary: fmt.Sprintf("edit_file %s: %d replacement(s), first at line %d", d.Path, n, line)}, nil
}

// occurrenceLines lists the line numbers of the first few occurrences.
func occurrenceLines(content, s string, most int) string {
	var lines []string
	off := 0
	for len(lines) < most {
		i := strings.Index(content[off:], s)
		if i < 0 {
			break
		}
		lines = append(lines, fmt.Sprint(strings.Count(content[:off+i], "\n")+1))
		off += i + len(s)
	}
	return strings.Join(lines, ", ")
}
