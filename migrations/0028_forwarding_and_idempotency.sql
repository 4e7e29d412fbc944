-- Forwarding to build servers (issue 22): each server's edge-signing key, encrypted. Idempotency-Key (issue 24): the first
-- answer to a keyed POST per principal, route and key, kept 24 h (the body encrypted).
CREATE TABLE "idempotency_keys" (
	"principal" text NOT NULL,
	"route" text NOT NULL,
	"key" text NOT NULL,
	"request_hash" text NOT NULL,
	"status" integer,
	"content_type" text,
	"body_ciphertext" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "idempotency_keys_principal_route_key_pk" PRIMARY KEY("principal","route","key")
);
--> statement-breakpoint
ALTER TABLE "servers" ADD COLUMN "edge_key_ciphertext" text;--> statement-breakpoint
CREATE INDEX "idempotency_keys_created_idx" ON "idempotency_keys" USING btree ("created_at");