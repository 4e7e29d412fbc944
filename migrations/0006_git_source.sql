CREATE TABLE "git_push_events" (
	"id" text PRIMARY KEY NOT NULL,
	"org_id" text NOT NULL,
	"project_id" text NOT NULL,
	"hook_id" text NOT NULL,
	"provider" text NOT NULL,
	"delivery_id" text NOT NULL,
	"event" text NOT NULL,
	"ref" text,
	"branch" text,
	"commit" text,
	"outcome" text NOT NULL,
	"received_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "git_push_hooks" (
	"id" text PRIMARY KEY NOT NULL,
	"org_id" text NOT NULL,
	"project_id" text NOT NULL,
	"secret" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "projects" ADD COLUMN "git_default_branch" text;--> statement-breakpoint
ALTER TABLE "projects" ADD COLUMN "git_linked_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "projects" ADD COLUMN "auto_deploy" boolean DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE "projects" ADD COLUMN "webhook_domain" text;--> statement-breakpoint
ALTER TABLE "projects" ADD COLUMN "last_push_commit" text;--> statement-breakpoint
ALTER TABLE "projects" ADD COLUMN "last_push_branch" text;--> statement-breakpoint
ALTER TABLE "projects" ADD COLUMN "last_push_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "git_push_events" ADD CONSTRAINT "git_push_events_org_id_organizations_id_fk" FOREIGN KEY ("org_id") REFERENCES "public"."organizations"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "git_push_events" ADD CONSTRAINT "git_push_events_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "git_push_events" ADD CONSTRAINT "git_push_events_hook_id_git_push_hooks_id_fk" FOREIGN KEY ("hook_id") REFERENCES "public"."git_push_hooks"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "git_push_hooks" ADD CONSTRAINT "git_push_hooks_org_id_organizations_id_fk" FOREIGN KEY ("org_id") REFERENCES "public"."organizations"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "git_push_hooks" ADD CONSTRAINT "git_push_hooks_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "git_push_events_delivery_idx" ON "git_push_events" USING btree ("hook_id","delivery_id");--> statement-breakpoint
CREATE INDEX "git_push_events_project_idx" ON "git_push_events" USING btree ("project_id","received_at");--> statement-breakpoint
CREATE UNIQUE INDEX "git_push_hooks_project_idx" ON "git_push_hooks" USING btree ("project_id");--> statement-breakpoint
CREATE INDEX "git_push_hooks_org_idx" ON "git_push_hooks" USING btree ("org_id");