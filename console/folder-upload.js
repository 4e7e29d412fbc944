// @ts-check
/**
 * The folder-upload deploy, the same steps `wsp deploy` takes (functions/cli/deploy.ts):
 * POST /api/projects/folder/session → upload the tarball to the session's target →
 * POST /api/projects/folder/scan/{sessionId} → POST /api/projects/ensure (the scan's build
 * settings) → POST /api/deployments/build/access (queues the build). Each step reports to
 * `say`; a failed call rejects with its ApiError, carrying the step that failed.
 *
 * The upload goes only to this instance's own relay, with the session cookie: the target's
 * relative `url` is used, so the cookie never leaves this origin. A presigned object-storage
 * target (the cloud, or S3_* configured) is out of the console's reach: its CSP allows
 * connections to this origin only, so such an instance is told to use `wsp deploy`.
 */
import { activeOrganization, api, ApiError } from "./api.js";
import { humanSize } from "./tar.js";

/**
 * @typedef {{sessionId: string, url: string, absoluteUrl: string, method: string, headers: Record<string, string>, requiresAuth: boolean}} Target
 * @typedef {{id: string, name: string, routes: {free: {hostname: string}}}} Ensured
 * @typedef {{id: string, status: string, environment: string}} Deployment
 * @typedef {{project: Ensured, deployment: Deployment | null, queueError: unknown, scan: Record<string, any>}} Uploaded
 */

/** The scan's answers that go into ensure as they came (as the CLI passes them). */
const FROM_SCAN = ["framework", "buildCommand", "installCommand", "startCommand", "outputDirectory", "services"];

export class UploadError extends Error {}

/**
 * POSTs the tarball to the relay with XMLHttpRequest, whose upload events give the progress fetch does not.
 * @param {Target} target @param {Blob} tarball @param {(sent: number) => void} onProgress
 */
function relayUpload(target, tarball, onProgress) {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open("POST", new URL(target.url, location.origin).href);
    for (const [name, value] of Object.entries(target.headers)) xhr.setRequestHeader(name, value);
    const org = activeOrganization();
    if (org) xhr.setRequestHeader("x-organization-id", org);
    xhr.setRequestHeader("accept", "application/json");
    xhr.upload.onprogress = (e) => onProgress(e.loaded);
    xhr.onerror = () =>
      reject(new ApiError(0, { status: 0, title: "Network error", detail: "The upload did not reach the server. Check the connection and try again." }));
    xhr.onload = () => {
      if (xhr.status >= 200 && xhr.status < 300) return resolve(undefined);
      let problem;
      try {
        problem = JSON.parse(xhr.responseText);
      } catch {
        problem = { status: xhr.status, title: xhr.statusText };
      }
      reject(new ApiError(xhr.status, problem));
    };
    xhr.send(tarball);
  });
}

/**
 * Runs the steps for a packed folder. A retry after ensure refused the body (a bad name) passes
 * the error's `resume`: the session is already uploaded and scanned, only ensure is sent again.
 * @param {{name: string, folder: string, tarball: Blob, say: (text: string) => void, resume?: {sessionId: string, scan: Record<string, any>}}} opts
 * @returns {Promise<Uploaded>}
 */
export async function uploadFolder(opts) {
  let sessionId = opts.resume?.sessionId;
  let scan = opts.resume?.scan;
  if (!sessionId || !scan) {
    opts.say("Opening an upload session…");
    /** @type {Target} */
    const target = await api("POST", "/projects/folder/session", { name: opts.folder.slice(0, 255) || undefined, sizeBytes: opts.tarball.size });
    if (!target.requiresAuth) {
      throw new UploadError(
        "This instance stores uploads in object storage, which the console cannot reach: deploy the folder with the CLI (wsp deploy), or link a git repository.",
      );
    }
    const total = opts.tarball.size;
    let shown = -1;
    await relayUpload(target, opts.tarball, (sent) => {
      // A step every 10 %: a status line read aloud at every byte would say nothing else.
      const percent = Math.floor((sent / total) * 10) * 10;
      if (percent === shown) return;
      shown = percent;
      opts.say(`Uploading ${humanSize(total)}: ${percent} %…`);
    });
    sessionId = target.sessionId;
    opts.say("Detecting how to build it…");
    scan = /** @type {Record<string, any>} */ (await api("POST", `/projects/folder/scan/${encodeURIComponent(sessionId)}`));
  }
  opts.say("Creating the project…");
  const fromScan = Object.fromEntries(FROM_SCAN.filter((k) => scan[k] !== null && scan[k] !== undefined).map((k) => [k, scan[k]]));
  /** @type {Ensured} */
  let project;
  try {
    project = await api("POST", "/projects/ensure", { name: opts.name, gitProvider: "upload", uploadSessionId: sessionId, ...fromScan });
  } catch (e) {
    // Kept for a retry: the session is scanned, only the ensure has to be sent again.
    throw Object.assign(e instanceof Error ? e : new Error(String(e)), { resume: { sessionId, scan } });
  }
  opts.say("Queuing its first deployment…");
  try {
    const access = await api("POST", "/deployments/build/access", { projectId: project.id, uploadSessionId: sessionId });
    return { project, deployment: access.deployment, queueError: null, scan };
  } catch (e) {
    // The project exists now: the page says so and links to it rather than offering to create it again.
    return { project, deployment: null, queueError: e, scan };
  }
}
