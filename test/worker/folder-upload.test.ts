import { useHarness } from "../support/harness";
import { workerHarness } from "../support/worker-harness";
import { folderUploadSuite } from "../suites/folder-upload.suite";

folderUploadSuite(useHarness(workerHarness));
