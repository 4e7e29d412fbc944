/**
 * Request framing as the edge accepts it (RFC 9112 §6, §3.2): a request reaches
 * an app only when its body boundaries cannot be read two ways. Node's parser
 * already refuses the classic forms (CL.TE, TE.CL, differing Content-Lengths,
 * obs-fold, bare LF); what it lets through, and what a proxy on a pooled
 * upstream connection must not forward unframed, is refused here with 400 and
 * the connection closed, as nginx and Envoy do:
 * - more than one Host, Content-Length or Transfer-Encoding field line;
 * - Transfer-Encoding together with Content-Length;
 * - any Transfer-Encoding other than exactly `chunked` (`gzip, chunked` would be
 *   forwarded decoded of its chunks but still gzip, with nothing saying so);
 * - `Connection` naming Content-Length, Transfer-Encoding or Host (hop-by-hop
 *   removal would strip the framing, or the routing, before the app);
 * - an absolute-form target whose authority is not the Host;
 * - a body on GET, HEAD or TRACE (Transfer-Encoding, or a Content-Length other
 *   than 0): RFC 9110 gives it no meaning, and apps and caches disagree on
 *   whether to read it; refusing it leaves nothing to disagree on. DELETE,
 *   OPTIONS and every other method may carry a body.
 * What passes is forwarded with the framing it came with: a Content-Length as
 * received, a chunked body chunked, no body as none.
 */
import type { IncomingMessage } from "node:http";

export type BodyFraming = "none" | "length" | "chunked";
export type Framing = { body: BodyFraming } | { refused: string };

const NO_BODY_METHODS = new Set(["GET", "HEAD", "TRACE"]);
const FRAMING_HEADERS = new Set(["content-length", "transfer-encoding", "host"]);
const ABSOLUTE = /^([A-Za-z][A-Za-z0-9+.-]*):\/\/([^/?#]*)/;

/** `host[:port]` lower-cased, without the scheme's default port. */
function authority(value: string, scheme: string): string {
  const a = value.trim().toLowerCase();
  const port = scheme === "https" ? ":443" : scheme === "http" ? ":80" : "";
  return port && a.endsWith(port) ? a.slice(0, -port.length) : a;
}

/** How the request's body is framed, or why it is refused (one pass over the raw header lines). */
export function requestFraming(req: IncomingMessage): Framing {
  const raw = req.rawHeaders;
  let hosts = 0;
  let lengths = 0;
  let codings = 0;
  let host = "";
  let length = "";
  let coding = "";
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    if (name === "host") {
      hosts++;
      host = raw[i + 1]!;
    } else if (name === "content-length") {
      lengths++;
      length = raw[i + 1]!.trim();
    } else if (name === "transfer-encoding") {
      codings++;
      coding = raw[i + 1]!.trim().toLowerCase();
    } else if (name === "connection") {
      for (const token of raw[i + 1]!.split(",")) if (FRAMING_HEADERS.has(token.trim().toLowerCase())) return { refused: "connection names a framing header" };
    }
  }
  if (hosts > 1) return { refused: "several Host headers" };
  if (lengths > 1 || codings > 1) return { refused: "several framing headers" };
  if (lengths > 0 && codings > 0) return { refused: "Transfer-Encoding with Content-Length" };
  if (codings > 0 && coding !== "chunked") return { refused: "Transfer-Encoding other than chunked" };
  const absolute = ABSOLUTE.exec(req.url ?? "");
  if (absolute) {
    const scheme = absolute[1]!.toLowerCase();
    if (authority(absolute[2]!, scheme) !== authority(host, scheme)) return { refused: "Host differs from the target" };
  }
  const body: BodyFraming = codings > 0 ? "chunked" : lengths > 0 && length !== "0" ? "length" : "none";
  if (body !== "none" && NO_BODY_METHODS.has(req.method ?? "")) return { refused: `a body on ${req.method}` };
  return { body };
}
