-- AlterTable
ALTER TABLE "products" ADD COLUMN     "image_key" TEXT,
ADD COLUMN     "image_sha256" TEXT,
ADD COLUMN     "image_size" INTEGER,
ADD COLUMN     "image_type" TEXT,
ADD COLUMN     "image_updated_at" TIMESTAMPTZ(3);

