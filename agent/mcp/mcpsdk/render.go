package mcpsdk

import (
	"encoding/json"
	"fmt"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/latchd/latch/agent/tools"
)

// render turns a call's result into the text the model and the chat see:
// text as it is; an image, audio or binary resource described (type and
// size: latch's providers take tool results as text), an embedded text
// resource with its URI, a link as its URI; structured content as JSON
// when nothing else came. The daemon scrubs it of credentials and caps it
// (agent/mcp), not the sidecar, which knows none of latch's secrets.
func render(res *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		switch c := c.(type) {
		case *sdk.TextContent:
			b.WriteString(c.Text)
		case *sdk.ImageContent:
			fmt.Fprintf(&b, "[image: %s, %d bytes; not shown to the model]", oneLine(c.MIMEType, 80), len(c.Data))
		case *sdk.AudioContent:
			fmt.Fprintf(&b, "[audio: %s, %d bytes; not shown to the model]", oneLine(c.MIMEType, 80), len(c.Data))
		case *sdk.ResourceLink:
			fmt.Fprintf(&b, "[resource link: %s", oneLine(c.URI, 500))
			if c.Name != "" {
				fmt.Fprintf(&b, " (%s)", oneLine(c.Name, 200))
			}
			if c.MIMEType != "" {
				fmt.Fprintf(&b, ", %s", oneLine(c.MIMEType, 80))
			}
			b.WriteString("]")
		case *sdk.EmbeddedResource:
			r := c.Resource
			if r == nil {
				b.WriteString("[empty resource]")
				break
			}
			if r.Text != "" || len(r.Blob) == 0 {
				fmt.Fprintf(&b, "[resource %s]\n%s", oneLine(r.URI, 500), r.Text)
			} else {
				fmt.Fprintf(&b, "[resource %s: %s, %d bytes; not shown to the model]", oneLine(r.URI, 500), oneLine(r.MIMEType, 80), len(r.Blob))
			}
		default:
			fmt.Fprintf(&b, "[content of type %T not shown]", c)
		}
	}
	if b.Len() == 0 && res.StructuredContent != nil {
		if js, err := json.Marshal(res.StructuredContent); err == nil {
			b.Write(js)
		}
	}
	return strings.ToValidUTF8(b.String(), "\uFFFD")
}

// oneLine is s on one line, cut to n bytes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		return tools.CutText(s, n) + "…"
	}
	return s
}
