import { useHarness } from "../support/harness";
import { workerHarness } from "../support/worker-harness";
import { folderUploadHostileSuite } from "../suites/folder-upload-hostile.suite";

folderUploadHostileSuite(useHarness(workerHarness));
