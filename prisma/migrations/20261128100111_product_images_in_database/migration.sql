-- CreateTable
CREATE TABLE "blobs" (
    "id" BIGSERIAL NOT NULL,
    "key" TEXT NOT NULL,
    "size" BIGINT NOT NULL,
    "chunk_size" INTEGER NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "blobs_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "blob_chunks" (
    "blob_id" BIGINT NOT NULL,
    "seq" INTEGER NOT NULL,
    "data" BYTEA NOT NULL,

    CONSTRAINT "blob_chunks_pkey" PRIMARY KEY ("blob_id","seq")
);

-- Images are compressed already: TOAST stores the chunks out of line without trying again.
ALTER TABLE "blob_chunks" ALTER COLUMN "data" SET STORAGE EXTERNAL;

-- CreateIndex
CREATE UNIQUE INDEX "blobs_key_key" ON "blobs"("key");

-- AddForeignKey
ALTER TABLE "products" ADD CONSTRAINT "products_image_key_fkey" FOREIGN KEY ("image_key") REFERENCES "blobs"("key") ON DELETE RESTRICT ON UPDATE CASCADE NOT VALID;
-- NOT VALID: a deployment that kept its images as files has rows naming keys that have no
-- blob yet: new and changed keys are checked at once, and scripts/import-uploads.ts
-- validates the constraint once it has imported the files (docs/operations.md).

-- AddForeignKey
ALTER TABLE "blob_chunks" ADD CONSTRAINT "blob_chunks_blob_id_fkey" FOREIGN KEY ("blob_id") REFERENCES "blobs"("id") ON DELETE CASCADE ON UPDATE CASCADE;

