/**
 * The self-hosted listener's responses (functions/self-hosted/http-server.ts creates its server with this class):
 * an API answer's `x-request-id` joins the header block as the head is written, rather than being set on the
 * response beforehand. One header set beforehand turns Node's `writeHead(status, headers)` into its slow case,
 * which validates and stores every header of the answer one by one (~5 % of the settings route's CPU, issue 25).
 * functions/app.ts puts the id in REQUEST_ID_SLOT; a response nothing put an id on (an app's, through the edge)
 * is written as it is.
 */
import { type IncomingMessage, type OutgoingHttpHeader, type OutgoingHttpHeaders, ServerResponse } from "node:http";
import { REQUEST_ID_SLOT } from "../../shared/http/request-id";

type HeadersArg = OutgoingHttpHeaders | OutgoingHttpHeader[];

export class RequestIdResponse<Request extends IncomingMessage = IncomingMessage> extends ServerResponse<Request> {
  [REQUEST_ID_SLOT]: string | undefined = undefined;

  override writeHead(statusCode: number, reasonOrHeaders?: string | HeadersArg, maybeHeaders?: HeadersArg): this {
    const id = this[REQUEST_ID_SLOT];
    const reason = typeof reasonOrHeaders === "string" ? reasonOrHeaders : undefined;
    let headers = reason === undefined ? (reasonOrHeaders as HeadersArg | undefined) : maybeHeaders;
    if (id !== undefined) {
      this[REQUEST_ID_SLOT] = undefined;
      // A plain object (every answer of the app) gets the id as one more key; any other form takes Node's own way.
      if (headers && !Array.isArray(headers)) headers = { ...headers, "x-request-id": id };
      else this.setHeader("x-request-id", id);
    }
    return reason === undefined ? super.writeHead(statusCode, headers) : super.writeHead(statusCode, reason, headers);
  }
}
