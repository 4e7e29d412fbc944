-- Placement (issue 22): where each deployment builds and runs, resolved when it is queued. Existing rows become `local`
-- (the in-process runner took every job before); `server_id` is deliberately not a foreign key (a deleted server still
-- explains why a deployment waits); `waiting_for` is why a queued one waits (reads recompute it).
ALTER TABLE "deployments" ADD COLUMN "placement" text DEFAULT 'local' NOT NULL;--> statement-breakpoint
ALTER TABLE "deployments" ADD COLUMN "server_id" text;--> statement-breakpoint
ALTER TABLE "deployments" ADD COLUMN "server_labels" text[] DEFAULT '{}'::text[] NOT NULL;--> statement-breakpoint
ALTER TABLE "deployments" ADD COLUMN "waiting_for" text;