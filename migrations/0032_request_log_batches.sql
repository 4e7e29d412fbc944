CREATE TABLE "request_log_batches" (
	"project_id" text NOT NULL,
	"first_seq" bigint NOT NULL,
	"last_seq" bigint NOT NULL,
	"org_id" text NOT NULL,
	"first_at" timestamp with time zone NOT NULL,
	"last_at" timestamp with time zone NOT NULL,
	"lines" text NOT NULL,
	CONSTRAINT "request_log_batches_project_id_first_seq_pk" PRIMARY KEY("project_id","first_seq")
);
--> statement-breakpoint
ALTER TABLE "request_log_batches" ADD CONSTRAINT "request_log_batches_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "request_log_batches_last_at_idx" ON "request_log_batches" USING brin ("last_at");--> statement-breakpoint
-- Request lines written before this migration move to the batch table, one line per batch, in the compact
-- text form of functions/logs/request-lines.ts (tab-separated; backslash, tab, newline and carriage return
-- escaped; `\N` for null), and leave log_lines, which keeps build and runtime lines only.
CREATE FUNCTION workspace_request_line_field(value text) RETURNS text AS $$
  SELECT replace(replace(replace(replace(value, '\', '\\'), E'\t', '\t'), E'\n', '\n'), E'\r', '\r')
$$ LANGUAGE sql IMMUTABLE;--> statement-breakpoint
CREATE FUNCTION workspace_request_line_int(value jsonb) RETURNS text AS $$
  SELECT CASE WHEN jsonb_typeof(value) = 'number' THEN round(value::text::numeric)::bigint::text ELSE '0' END
$$ LANGUAGE sql IMMUTABLE;--> statement-breakpoint
INSERT INTO "request_log_batches" ("project_id", "first_seq", "last_seq", "org_id", "first_at", "last_at", "lines")
SELECT l."project_id", l."seq", l."seq", l."org_id", l."at", l."at",
  concat_ws(E'\t',
    (extract(epoch from l."at") * 1000)::bigint::text,
    coalesce(workspace_request_line_field(l."deployment_id"), '\N'),
    workspace_request_line_field(coalesce(l."fields"->>'method', '')),
    coalesce(workspace_request_line_field(l."fields"->>'host'), '\N'),
    workspace_request_line_field(coalesce(l."fields"->>'path', '')),
    workspace_request_line_int(l."fields"->'status'),
    workspace_request_line_int(l."fields"->'durationMs'),
    workspace_request_line_int(l."fields"->'bytes'),
    workspace_request_line_field(coalesce(l."fields"->>'clientAddress', '')),
    coalesce(workspace_request_line_field(l."fields"->>'environment'), '\N'),
    coalesce(workspace_request_line_field(l."fields"->>'rule'), '\N')) || E'\n'
FROM "log_lines" l JOIN "projects" p ON p."id" = l."project_id"
WHERE l."kind" = 'request';--> statement-breakpoint
DELETE FROM "log_lines" WHERE "kind" = 'request';--> statement-breakpoint
DROP FUNCTION workspace_request_line_field(text);--> statement-breakpoint
DROP FUNCTION workspace_request_line_int(jsonb);
