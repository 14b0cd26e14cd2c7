-- AlterTable
ALTER TABLE "passkeys" ADD COLUMN     "public_id" UUID NOT NULL DEFAULT gen_random_uuid();

-- CreateIndex
CREATE UNIQUE INDEX "passkeys_public_id_key" ON "passkeys"("public_id");

