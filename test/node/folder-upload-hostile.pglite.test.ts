import { useHarness } from "../support/harness";
import { pgliteHarness } from "../support/node-harness";
import { folderUploadHostileSuite } from "../suites/folder-upload-hostile.suite";

folderUploadHostileSuite(useHarness(pgliteHarness));
