import { useHarness } from "../support/harness";
import { pgliteHarness } from "../support/node-harness";
import { folderUploadSuite } from "../suites/folder-upload.suite";

folderUploadSuite(useHarness(pgliteHarness));
