-- AlterTable
ALTER TABLE "security_events" ADD COLUMN     "count" INTEGER NOT NULL DEFAULT 1,
ADD COLUMN     "first_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP;


-- The rows before this one stand for one event each, which happened when they were made.
UPDATE "security_events" SET "first_at" = "created_at";
