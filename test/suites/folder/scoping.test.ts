/** Folder upload: another organization's session and project answer like unknown ones. */

import { describe, expect, it } from "vitest";
import { EnsuredProjectSchema } from "../../../functions/projects/folder/ensure-schema";
import { folderClient, NEXT_APP, problemWithoutId } from "../../support/folder-client";
import { expectBody, expectStatus, seedTenant } from "../../support/harness";
import { tgz } from "../../support/tar-fixtures";
import { useRuntimeHarness } from "../../support/runtime";

const h = useRuntimeHarness();
const c = folderClient(h);

describe("folder upload: organization scoping", () => {
  it("another organization's session and project answer the same 404 as unknown ones", async () => {
    const owner = await seedTenant(h);
    const outsider = await seedTenant(h);
    const { target } = await c.uploadAndScan(owner, await tgz(NEXT_APP));
    const project = await expectBody(await c.ensure(owner, { name: "Mine", uploadSessionId: target.sessionId }), 201, EnsuredProjectSchema);

    const foreignScan = await problemWithoutId(await c.scan(outsider, target.sessionId), 404);
    const unknownScan = await problemWithoutId(await c.scan(outsider, "ups_00000000000000000000000000"), 404);
    expect(foreignScan).toEqual(unknownScan);
    expect(foreignScan.detail).toBe("Upload session not found");

    const foreignSession = await problemWithoutId(await c.ensure(outsider, { name: "x", uploadSessionId: target.sessionId }), 404);
    const unknownSession = await problemWithoutId(await c.ensure(outsider, { name: "x", uploadSessionId: "ups_nope" }), 404);
    expect(foreignSession).toEqual(unknownSession);

    const foreignProject = await problemWithoutId(await c.ensure(outsider, { name: "x", projectId: project.id }), 404);
    const unknownProject = await problemWithoutId(await c.ensure(outsider, { name: "x", projectId: "prj_nope" }), 404);
    expect(foreignProject).toEqual(unknownProject);
    expect(foreignProject.detail).toBe("Project not found");
    expect(await c.projectCount(outsider.orgId)).toBe(0);
    expect((await expectStatus(await h.request(`/api/projects/${project.id}`, { token: owner.token }), 200)).name).toBe("Mine");

    if (target.requiresAuth) {
      // The relay itself: another organization cannot write into the session either.
      const foreignUpload = await problemWithoutId(await c.sendUpload(outsider, target, await tgz({ "x.txt": "x" })), 404);
      const unknownUpload = await problemWithoutId(
        await c.sendUpload(outsider, { ...target, url: "/api/projects/folder/upload/ups_00000000000000000000000000" }, await tgz({ "x.txt": "x" })),
        404,
      );
      expect(foreignUpload).toEqual(unknownUpload);
    }
  });
});
