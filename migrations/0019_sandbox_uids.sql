CREATE TABLE "sandbox_uids" (
	"project_id" text PRIMARY KEY NOT NULL,
	"org_id" text NOT NULL,
	"uid" integer NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "sandbox_uids_uid_unique" UNIQUE("uid")
);
--> statement-breakpoint
ALTER TABLE "sandbox_uids" ADD CONSTRAINT "sandbox_uids_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "sandbox_uids" ADD CONSTRAINT "sandbox_uids_org_id_organizations_id_fk" FOREIGN KEY ("org_id") REFERENCES "public"."organizations"("id") ON DELETE cascade ON UPDATE no action;