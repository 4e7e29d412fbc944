/**
 * The one error type and its wire form, `application/problem+json` (RFC 9457):
 * `type`, `title`, `status`, `detail`, plus `field` (dotted path in the request
 * body), `allowed` (enum values) and `requestId`.
 */
export type ProblemCode =
  | "validation"
  | "unauthorized"
  | "forbidden"
  | "not_found"
  | "conflict"
  | "payload_too_large"
  | "unsupported_media_type"
  | "unprocessable"
  | "too_many_requests"
  | "internal"
  | "bad_gateway";

const STATUS: Record<ProblemCode, { status: number; title: string }> = {
  validation: { status: 400, title: "Bad Request" },
  unauthorized: { status: 401, title: "Unauthorized" },
  forbidden: { status: 403, title: "Forbidden" },
  not_found: { status: 404, title: "Not Found" },
  conflict: { status: 409, title: "Conflict" },
  payload_too_large: { status: 413, title: "Payload Too Large" },
  unsupported_media_type: { status: 415, title: "Unsupported Media Type" },
  /** Not a validation failure (those are 400): a well-formed request that contradicts an earlier one (an Idempotency-Key reused with another body). */
  unprocessable: { status: 422, title: "Unprocessable Content" },
  too_many_requests: { status: 429, title: "Too Many Requests" },
  internal: { status: 500, title: "Internal Server Error" },
  /** An upstream this request depends on (a git host) is unreachable or answered badly. */
  bad_gateway: { status: 502, title: "Bad Gateway" },
};

export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  field?: string;
  allowed?: Array<string | number | boolean | null>;
  /** A transfer's failed step (POST /api/projects/:id/transfer/…). */
  step?: string;
  requestId?: string;
}

export class ApiError extends Error {
  readonly status: number;
  constructor(
    readonly code: ProblemCode,
    detail: string,
    readonly extra: { field?: string; allowed?: Problem["allowed"]; step?: string } = {},
    /** Response headers that go with the problem (e.g. `Retry-After`). */
    readonly headers: Record<string, string> = {},
  ) {
    super(detail);
    this.status = STATUS[code].status;
  }

  toProblem(requestId?: string): Problem {
    return {
      type: `urn:workspace:problem:${this.code.replace(/_/g, "-")}`,
      title: STATUS[this.code].title,
      status: this.status,
      detail: this.message,
      ...this.extra,
      ...(requestId ? { requestId } : {}),
    };
  }
}

export const notFound = (what = "Resource") => new ApiError("not_found", `${what} not found`);
export const badRequest = (field: string | undefined, detail: string, allowed?: Problem["allowed"]) =>
  new ApiError("validation", detail, { ...(field ? { field } : {}), ...(allowed ? { allowed } : {}) });

/** 429 with `Retry-After` (whole seconds, at least 1). */
export const tooManyRequests = (detail: string, retryAfterSeconds: number) =>
  new ApiError("too_many_requests", detail, {}, { "retry-after": String(Math.max(1, Math.ceil(retryAfterSeconds))) });
