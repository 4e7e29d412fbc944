-- The token or cookie session that minted a deployment-session or log-stream token: an open stream authenticated with
-- such a token ends when its parent is revoked, expires or logs out. Tokens minted before have none (their own expiry holds).
ALTER TABLE "api_tokens" ADD COLUMN "parent_id" text;