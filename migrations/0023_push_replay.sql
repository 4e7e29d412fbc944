-- Push deliveries are deduplicated by a digest of their signed body per project, not by the host's delivery id (which is
-- not signed: a captured push resent with a new id was acted on again). Rows from before carry no digest: each gets a
-- unique placeholder. `reason` says why a push queued nothing (outcome `stale`).
DROP INDEX "git_push_events_delivery_idx";--> statement-breakpoint
ALTER TABLE "git_push_events" ALTER COLUMN "delivery_id" DROP NOT NULL;--> statement-breakpoint
ALTER TABLE "git_push_events" ADD COLUMN "body_digest" text;--> statement-breakpoint
UPDATE "git_push_events" SET "body_digest" = 'legacy:' || "id";--> statement-breakpoint
ALTER TABLE "git_push_events" ALTER COLUMN "body_digest" SET NOT NULL;--> statement-breakpoint
ALTER TABLE "git_push_events" ADD COLUMN "reason" text;--> statement-breakpoint
CREATE UNIQUE INDEX "git_push_events_body_idx" ON "git_push_events" USING btree ("project_id","body_digest");
