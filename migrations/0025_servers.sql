-- Build servers (issue 22): one row per runner attached to an organization, its runner token stored only as a SHA-256 hash
-- (deleting the row revokes it), and the status the runner reports through POST /api/runner/heartbeat.
CREATE TABLE "servers" (
	"id" text PRIMARY KEY NOT NULL,
	"org_id" text NOT NULL,
	"name" text NOT NULL,
	"labels" text[] DEFAULT '{}'::text[] NOT NULL,
	"public_url" text,
	"token_hash" text NOT NULL,
	"token_prefix" text NOT NULL,
	"draining" boolean DEFAULT false NOT NULL,
	"version" text,
	"capacity" integer,
	"sandbox" jsonb,
	"limits" jsonb,
	"last_seen_at" timestamp with time zone,
	"created_by" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "servers" ADD CONSTRAINT "servers_org_id_organizations_id_fk" FOREIGN KEY ("org_id") REFERENCES "public"."organizations"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "servers" ADD CONSTRAINT "servers_created_by_users_id_fk" FOREIGN KEY ("created_by") REFERENCES "public"."users"("id") ON DELETE set null ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "servers_token_hash_idx" ON "servers" USING btree ("token_hash");--> statement-breakpoint
CREATE INDEX "servers_org_idx" ON "servers" USING btree ("org_id","id");