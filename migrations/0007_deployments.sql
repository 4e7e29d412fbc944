CREATE TABLE "deployment_transitions" (
	"id" text PRIMARY KEY NOT NULL,
	"org_id" text NOT NULL,
	"deployment_id" text NOT NULL,
	"status" text NOT NULL,
	"at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "deployments" ADD COLUMN "source" text DEFAULT 'git' NOT NULL;--> statement-breakpoint
ALTER TABLE "deployments" ADD COLUMN "git_provider" text;--> statement-breakpoint
ALTER TABLE "deployments" ADD COLUMN "git_owner" text;--> statement-breakpoint
ALTER TABLE "deployments" ADD COLUMN "git_repo" text;--> statement-breakpoint
ALTER TABLE "deployments" ADD COLUMN "artifact_key" text;--> statement-breakpoint
ALTER TABLE "deployments" ADD COLUMN "upload_session_id" text;--> statement-breakpoint
ALTER TABLE "deployments" ADD COLUMN "current" boolean DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE "deployments" ADD COLUMN "failure_reason" text;--> statement-breakpoint
ALTER TABLE "deployments" ADD COLUMN "created_by" text;--> statement-breakpoint
ALTER TABLE "deployments" ADD COLUMN "claimed_by" text;--> statement-breakpoint
ALTER TABLE "deployments" ADD COLUMN "lease_expires_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "deployments" ADD COLUMN "updated_at" timestamp with time zone DEFAULT now() NOT NULL;--> statement-breakpoint
-- Rows from before `current`: the newest ready deployment of each environment is the one serving.
UPDATE "deployments" SET "current" = true WHERE "id" IN (SELECT DISTINCT ON ("environment_id") "id" FROM "deployments" WHERE "status" = 'ready' ORDER BY "environment_id", "id" DESC);--> statement-breakpoint
-- Their history starts with what is known: created, and finished when it did.
INSERT INTO "deployment_transitions" ("id", "org_id", "deployment_id", "status", "at") SELECT 'dtr_' || "id" || '_q', "org_id", "id", 'queued', "created_at" FROM "deployments";--> statement-breakpoint
INSERT INTO "deployment_transitions" ("id", "org_id", "deployment_id", "status", "at") SELECT 'dtr_' || "id" || '_s', "org_id", "id", "status", coalesce("finished_at", "created_at") FROM "deployments" WHERE "status" <> 'queued';--> statement-breakpoint
ALTER TABLE "deployment_transitions" ADD CONSTRAINT "deployment_transitions_org_id_organizations_id_fk" FOREIGN KEY ("org_id") REFERENCES "public"."organizations"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "deployment_transitions" ADD CONSTRAINT "deployment_transitions_deployment_id_deployments_id_fk" FOREIGN KEY ("deployment_id") REFERENCES "public"."deployments"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "deployment_transitions_deployment_idx" ON "deployment_transitions" USING btree ("deployment_id","at");--> statement-breakpoint
ALTER TABLE "deployments" ADD CONSTRAINT "deployments_created_by_users_id_fk" FOREIGN KEY ("created_by") REFERENCES "public"."users"("id") ON DELETE set null ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "deployments_one_current_idx" ON "deployments" USING btree ("environment_id") WHERE "deployments"."current";--> statement-breakpoint
CREATE INDEX "deployments_queue_idx" ON "deployments" USING btree ("id") WHERE "deployments"."status" = 'queued';--> statement-breakpoint
ALTER TABLE "deployments" ADD CONSTRAINT "deployments_current_ready" CHECK (not "deployments"."current" or "deployments"."status" = 'ready');